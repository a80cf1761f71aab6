"""NanoWM denoiser: space/time factorised DiT, action injections, RoPE, named sizes."""

from ttlab.worldmodel.model.nanowm import NanoWM, NanoWMConfig, count_parameters, forward_flops
from ttlab.worldmodel.model.sizes import SIZES, size_config

__all__ = ["SIZES", "NanoWM", "NanoWMConfig", "count_parameters", "forward_flops", "size_config"]

"""Diffusion process around the NanoWM denoiser: schedules, targets, level sampling, samplers, rollout."""

from ttlab.worldmodel.diffusion.objective import DiffusionConfig, Objective, native_diffusion
from ttlab.worldmodel.diffusion.rollout import rollout
from ttlab.worldmodel.diffusion.samplers import SamplerConfig, sample_window, scheduling_matrix

__all__ = ["DiffusionConfig", "Objective", "native_diffusion", "SamplerConfig", "rollout", "sample_window", "scheduling_matrix"]

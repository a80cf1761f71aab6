"""Does this CPU have bf16 units, and what does that cost the world model's evidence step? Prints ONE JSON line last.

Measures, at one thread: the fp32 and bf16 matmul peaks, the ratio `ttlab.common.device.cpu_bf16_ok` decides by
(bf16 autocast is used on CPU only where bf16 is not slower), and the evidence configuration's training step
(`wm_evidence.py --abs-actions --action-map gaussian --refiner 32`, batch 16, eager) in the precision the
trainer would pick here, plus in bf16 where that is the pick. CPUs with AVX512-BF16 or AMX run bf16 several times
faster than fp32; AVX2-only CPUs emulate it at about 1/100 of the fp32 rate.

    python benchmarks/cpu_bf16.py [--steps 3] [--out benchmarks/results/cpu_bf16/NAME.json]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from ttlab.common.device import cpu_bf16_ok, cpu_bf16_speedup  # noqa: E402
from ttlab.common.result_file import emit_result  # noqa: E402
from ttlab.worldmodel.diffusion import Objective  # noqa: E402
from ttlab.worldmodel.throughput import matmul_peak, train_step_rate  # noqa: E402
from ttlab.worldmodel.train import build_datasets, build_model_config, dataset_action_pixels  # noqa: E402
from wm_evidence import build_parser, train_config  # noqa: E402


def cpu_flags() -> list[str]:
    """The bf16-related flags /proc/cpuinfo lists (Linux; empty elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    flags = next((ln.split(":", 1)[1].split() for ln in text.splitlines() if ln.startswith("flags")), [])
    return sorted(f for f in flags if f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=3, help="timed training steps per precision")
    ap.add_argument("--data", default="data/pusht64_smooth", help="PushT data (wm_evidence.py generates it)")
    ap.add_argument("--out", default="", help="also write the JSON here")
    args = ap.parse_args()
    if args.steps < 1:
        ap.error(f"--steps {args.steps}: must be >= 1")
    data = Path(args.data)
    if not (data / "ttlab_pusht.json").exists():
        sys.exit(f"cpu_bf16: {data}: no PushT data (run benchmarks/wm_evidence.py once, or pass --data)")
    torch.set_num_threads(1)
    ok = cpu_bf16_ok("this benchmark")
    res = {"benchmark": "cpu_bf16", "nproc": os.cpu_count(), "threads": 1, "cpu_flags": cpu_flags(),
           "torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
           "bf16_over_fp32_matmul_256": round(cpu_bf16_speedup(), 4), "bf16_autocast_used": ok,
           "fp32_matmul": matmul_peak(sizes=(512, 1024), dtype=torch.float32),
           "bf16_matmul": matmul_peak(sizes=(512, 1024) if ok else (512,), dtype=torch.bfloat16),
           "loadavg_before": [round(x, 2) for x in os.getloadavg()]}
    wm_args = build_parser().parse_args(["--abs-actions", "--action-map", "gaussian", "--refiner", "32"])
    cfg = train_config(wm_args, data, 16)
    train_ds, _ = build_datasets(cfg, None)
    mcfg = build_model_config(cfg, tuple(train_ds[0]["frames"].shape[1:]), train_ds.action_dim,
                              dataset_action_pixels(cfg, train_ds))
    obj = Objective(cfg.diffusion)
    res["wm_step_fp32"] = train_step_rate(mcfg, obj, 16, cfg.num_frames, steps=args.steps, dtype=torch.float32)
    if ok:
        res["wm_step_bf16"] = train_step_rate(mcfg, obj, 16, cfg.num_frames, steps=args.steps, dtype=torch.bfloat16)
    res["wm_step_trained_s"] = res["wm_step_bf16" if ok else "wm_step_fp32"]["step_s_median"]
    res["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    emit_result(res, args.out, indent=None)


if __name__ == "__main__":
    main()

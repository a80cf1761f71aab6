"""The world model's training step on CPU: this tree's NanoWM against another revision's, in one run. Prints ONE JSON
line last.

The `pusht_cpu` evidence configuration (batch 16 of 5 frames of 64x64, 128 wide, 6 blocks, bf16 autocast, one
thread): the exact step the trainer runs (objective.loss, backward, grad clip, AdamW) for this tree's model and
for the model file of `--ref` (read with `git show`, same weights), timed in alternation so that both see the
same machine load. Times are the process's CPU seconds (one thread: what the step costs, whatever share of a
busy machine it gets) beside wall seconds. The bf16 matmul peak is measured in the same run on the same clock;
fraction of peak = 3 x forward matmul FLOPs per step / step CPU seconds / peak. One profiled step of each model
gives the share of time per kind of operation (profiler wall time, distorted by a busy machine's preemption).

    python benchmarks/wm_step_speed.py [--ref main] [--steps 4] [--out benchmarks/results/wm_step_speed/wm_step_speed.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from ttlab.common.result_file import emit_result
from ttlab.worldmodel.diffusion import Objective
from ttlab.worldmodel.model import NanoWM, forward_flops
from ttlab.worldmodel.presets import pusht_cpu
from ttlab.worldmodel.throughput import matmul_peak
from ttlab.worldmodel.train import build_model_config

ROOT = Path(__file__).resolve().parent.parent
MODEL_FILE = "src/ttlab/worldmodel/model/nanowm.py"
KINDS = {"matmul": ("aten::mm", "aten::addmm", "aten::bmm", "aten::mkldnn_convolution", "aten::convolution_backward"),
         "copies and casts": ("aten::copy_", "aten::clone", "aten::cat", "aten::empty_strided", "aten::fill_",
                              "aten::zero_"),
         "norms and softmax": ("aten::native_layer_norm", "aten::native_layer_norm_backward", "aten::_softmax",
                               "aten::_softmax_backward_data", "aten::rsqrt", "aten::mean", "aten::pow")}


def git(*args: str) -> str:
    out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"wm_step_speed: git {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout


def load_reference(ref: str):
    """The NanoWM module of revision `ref`, imported under its own name beside this tree's."""
    src = git("show", f"{ref}:{MODEL_FILE}")
    path = Path(tempfile.mkdtemp()) / "nanowm_reference.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("nanowm_reference", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def make_step(model, obj: Objective, x: torch.Tensor, a: torch.Tensor):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss, _ = obj.loss(model, x, a)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


def op_shares(step) -> dict:
    """Share of the profiled step's self time per kind of operation, and the top operations."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
    ops = {e.key: e.self_cpu_time_total for e in prof.key_averages()}
    total = sum(ops.values())
    kinds = {k: sum(ops.get(n, 0.0) for n in names) / total for k, names in KINDS.items()}
    kinds["other (elementwise, optimizer, autograd)"] = 1 - sum(kinds.values())
    top = sorted(ops.items(), key=lambda kv: -kv[1])[:8]
    return {"kinds": {k: round(v, 3) for k, v in kinds.items()}, "top_ops": {n: round(v / total, 3) for n, v in top}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ref", default="main", help="the revision whose model file is the baseline")
    ap.add_argument("--steps", type=int, default=4, help="timed steps of each model (alternating)")
    ap.add_argument("--out", default="", help="also write the JSON here")
    args = ap.parse_args()
    if args.steps < 1:
        raise SystemExit(f"wm_step_speed: --steps {args.steps} must be >= 1")
    torch.set_num_threads(1)
    t_start, load_before = time.perf_counter(), os.getloadavg()
    ref = load_reference(args.ref)
    tc = pusht_cpu()
    cfg = build_model_config(tc, (3, 64, 64), 2 * tc.frame_interval)
    obj = Objective(tc.diffusion)
    torch.manual_seed(0)
    new = NanoWM(cfg)
    old = ref.NanoWM(ref.NanoWMConfig(**asdict(cfg)))
    old.load_state_dict(new.state_dict())
    B, Fr = tc.batch_size, tc.num_frames
    x = torch.rand(B, Fr, 3, 64, 64) * 2 - 1  # (B, F, C, H, W)
    a = torch.randn(B, Fr, cfg.action_dim)
    with torch.no_grad():  # same weights, same function (fp32)
        t, cond = torch.rand(B, Fr) * 1000, x[:, 1]
        parity = (new(x, t, a, cond=cond) - old(x, t, a, cond=cond)).abs().max().item()
    steps = {"reference": make_step(old, obj, x, a), "this tree": make_step(new, obj, x, a)}
    for s in steps.values():
        s()
        s()
    cpu = {k: [] for k in steps}
    wall = {k: [] for k in steps}
    for _ in range(args.steps):
        for k, s in steps.items():
            c0, w0 = time.process_time(), time.perf_counter()
            s()
            cpu[k].append(time.process_time() - c0)
            wall[k].append(time.perf_counter() - w0)
    peak = matmul_peak(dtype=torch.bfloat16, clock=time.process_time)
    flop = 3 * forward_flops(cfg, Fr) * B
    res: dict = {"benchmark": "wm_step_speed", "commit": git("rev-parse", "HEAD").strip(), "reference": args.ref,
                 "torch": torch.__version__, "threads": 1, "nproc": os.cpu_count(),
                 "config": {"preset": "pusht_cpu", "batch": B, "frames": Fr, "hidden": cfg.hidden, "depth": cfg.depth,
                            "patch": cfg.patch_size, "tokens_per_step": B * Fr * cfg.tokens_per_frame,
                            "precision": "bf16 autocast"},
                 "gflop_per_step": round(flop / 1e9, 2), "bf16_matmul_peak_gflops_cpu_clock": peak,
                 "fp32_output_max_abs_diff": parity}
    for k in steps:
        c = sorted(cpu[k])[len(cpu[k]) // 2]
        res[k] = {"step_cpu_s_median": round(c, 4), "step_cpu_s_all": [round(v, 4) for v in cpu[k]],
                  "step_wall_s_all": [round(v, 3) for v in wall[k]], "gflops_cpu_clock": round(flop / c / 1e9, 1),
                  "fraction_of_bf16_peak": round(flop / c / 1e9 / peak["peak_gflops"], 4)}
    res["speedup_cpu_time"] = round(res["reference"]["step_cpu_s_median"] / res["this tree"]["step_cpu_s_median"], 3)
    res["profile"] = {k: op_shares(s) for k, s in steps.items()}
    res["loadavg_before"] = [round(v, 2) for v in load_before]
    res["loadavg_end"] = [round(v, 2) for v in os.getloadavg()]
    res["wall_seconds"] = round(time.perf_counter() - t_start, 1)
    res["command"] = "python benchmarks/wm_step_speed.py " + " ".join(sys.argv[1:])
    emit_result(res, args.out)


if __name__ == "__main__":
    main()

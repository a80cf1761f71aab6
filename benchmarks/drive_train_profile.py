"""Where one PPO update's time goes (rollout + update), before and after the speedups, on one thread.

Runs one warm-up update and one profiled update (cProfile) per setup: the preset (after) and, with
--before, the pre-speedup settings of `drive_train.py --baseline`. Prints, per setup, the share of the
profiled time in named sections (cumulative time of these functions; sections nest, e.g. the encoder runs
inside the rollout and inside the update), then ONE JSON line last.

    python benchmarks/drive_train_profile.py [--preset fast_k2] [--core transformer] [--before]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from drive_train import Row, full_context, old_model, old_obs, old_ppo, with_core  # noqa: E402
from ttlab.drive.presets import TRAIN_PRESETS  # noqa: E402

SECTIONS = {  # name: (file suffix, function name)
    "rollout": ("rollout.py", "collect"),
    "sim_step": ("env.py", "step"),
    "prefill": ("transformer.py", "prefill"),
    "policy_step": ("", "forward_eval"),
    "ppo_update": ("ppo.py", "ppo_update"),
    "backward": ("", "run_backward"),
    "encoder": ("encoders.py", "forward"),
    "slot_pool": ("encoders.py", "slot_max_pool"),
    "attention": ("", "scaled_dot_product_attention"),
    "optimizer": ("adam.py", "step"),
}


def sections(stats: pstats.Stats) -> dict[str, float]:
    """Cumulative seconds per section: the largest entry matching (file suffix, function name); builtins
    (file '~', name like "<method 'run_backward' ...>") match by substring."""
    out = dict.fromkeys(SECTIONS, 0.0)
    for (file, _line, fn), (_cc, _nc, _tt, ct, _callers) in stats.stats.items():
        for name, (suffix, func) in SECTIONS.items():
            hit = (fn == func and file.endswith(suffix)) if suffix else (fn == func or (file == "~" and func in fn))
            if hit:
                out[name] = max(out[name], ct)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="fast_k2")
    ap.add_argument("--core", default="transformer")
    ap.add_argument("--before", action="store_true", help="also profile the pre-speedup settings")
    a = ap.parse_args()
    torch.set_num_threads(1)
    cfg = with_core(TRAIN_PRESETS[a.preset](), a.core)
    setups = [("after", cfg)] + ([("before", full_context(old_model(old_ppo(old_obs(cfg)))))] if a.before else [])
    out = {"benchmark": "drive_train_profile", "preset": a.preset, "core": a.core, "threads": 1,
           "loadavg_start": [round(x, 2) for x in os.getloadavg()],
           "commit": subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()}
    for name, c in setups:
        row = Row(name, c, torch.device("cpu"))
        row.step(timed=False)
        prof = cProfile.Profile()
        c0 = time.process_time()
        prof.enable()
        row.step(timed=True)
        prof.disable()
        cpu = time.process_time() - c0
        st = pstats.Stats(prof)
        total = max(st.total_tt, 1e-9)
        sec = {k: round(v / total, 3) for k, v in sections(st).items()}
        out[name] = {"cpu_s_per_update": round(cpu, 3), "in_play_steps": row.in_play,
                     "in_play_steps_per_cpu_s": round(row.in_play / cpu, 1), "share_of_time": sec}
        print(f"{name:7s} cpu {cpu:.2f}s/update, {row.in_play / cpu:,.0f} in-play steps per CPU-s; shares: "
              + " ".join(f"{k}={v:.2f}" for k, v in sec.items()), flush=True)
    out["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out))


if __name__ == "__main__":
    main()

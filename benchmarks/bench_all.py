"""`make bench`: every canonical figure in a quick mode, into runs/bench/<figure>/. Prints ONE JSON line last.

    python benchmarks/bench_all.py [--only drive_sim,wm_train] [--out runs/bench]

Quick modes check that each figure's command runs end to end and prints its JSON line; their numbers are
smoke-sized, not the committed figures (those are in benchmarks/results/<figure>/, each with its command).
Nothing is written under benchmarks/results/: the run fails if a file there changed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def quick_commands(out: Path) -> dict[str, list[str]]:
    """figure -> the argv (after `python`) of its quick mode, writing under out/<figure>/."""
    o = {name: out / name for name in (
        "drive_sim", "drive_train", "drive_adapt", "drive_selfplay", "discover_sandbox", "discover_search",
        "discover_polish", "discover_tasks", "erdos_basins", "wm_train", "wm_evidence")}
    return {
        "drive_sim": ["benchmarks/drive_sim.py", "--steps", "3", "--scenes", "16", "--threads", "1",
                      "--out", str(o["drive_sim"] / "drive_sim.json")],
        "drive_train": ["benchmarks/drive_train.py", "--updates", "1", "--threads", "1"],
        "drive_adapt": ["benchmarks/drive_adapt.py", "--seeds", "1", "--steps", "20000", "--eval-episodes", "1",
                        "--out", str(o["drive_adapt"] / "drive_adapt.json"), "--png", str(o["drive_adapt"] / "drive_adapt.png")],
        "drive_selfplay": ["benchmarks/drive_selfplay.py", "--preset", "selfplay_yield", "--minutes", "0.2",
                           "--threads", "1", "--eval-envs", "8", "--eval-episodes", "1", "--root", str(o["drive_selfplay"]),
                           "--eval-scenes", "procedural:n=16,agents=8,seed=1000",
                           "--out", str(o["drive_selfplay"] / "drive_selfplay.json")],
        "discover_sandbox": ["benchmarks/discover_sandbox.py", "--programs", "10", "--workers", "1",
                             "--out", str(o["discover_sandbox"] / "discover_sandbox.json")],
        "discover_search": ["benchmarks/discover_search.py", "--time-limit", "40s", "--seeds", "0", "--workers", "1",
                            "--program-budget-s", "5", "--root", str(o["discover_search"]),
                            "--out", str(o["discover_search"] / "discover_search.json"),
                            "--png", str(o["discover_search"] / "discover_search.png")],
        "discover_polish": ["benchmarks/discover_polish.py", "--time-limit", "30s", "--round-s", "15",
                            "--out", str(o["discover_polish"] / "erdos_polish.json")],
        "discover_tasks": ["benchmarks/discover_tasks.py", "--time-limit", "20s", "--tasks", "ac1", "--root",
                           str(o["discover_tasks"]), "--out", str(o["discover_tasks"] / "discover_tasks.json")],
        "erdos_basins": ["benchmarks/erdos_basins.py", "--multistart", "--n", "20", "--seconds", "5"],
        "erdos_skeletons": ["benchmarks/erdos_skeletons.py", "--skeleton",
                            "benchmarks/results/discover_polish/hop_s0.json@150", "--levels", "1", "--search", "--hops",
                            "2", "--top", "1", "--out", str(out / "erdos_skeletons" / "search.json")],
        "wm_train": ["benchmarks/wm_train.py", "--out", str(o["wm_train"] / "wm_train.json")],
        "drive_replay": ["benchmarks/drive_replay.py", "--procedural", "procedural:n=8,agents=8,seed=1000", "--envs", "8",
                         "--out", str(out / "drive_replay" / "drive_replay.json")],
        "drive_partner_adapt": ["benchmarks/drive_partner_adapt.py", "--preset", "partner_adapt_debug", "--seeds", "1",
                                "--cores", "transformer,mlp", "--aux", "off", "--eval-envs", "4", "--eval-episodes", "1",
                                "--jobs", "1", "--out", str(out / "drive_partner_adapt" / "drive_partner_adapt.json"),
                                "--png", str(out / "drive_partner_adapt" / "drive_partner_adapt.png")],
        "wm_evidence": ["benchmarks/wm_evidence.py", "--data", str(out / "wm_evidence" / "data"), "--episodes", "24",
                        "--episode-steps", "150", "--max-steps", "4", "--eval-windows", "4", "--rollout-episodes", "2",
                        "--run-name", "bench_quick", "--root", str(out / "wm_evidence" / "runs"),
                        "--out-dir", str(out / "wm_evidence")],
        "cpu_bf16": ["benchmarks/cpu_bf16.py", "--steps", "1", "--data", str(out / "wm_evidence" / "data"),
                     "--out", str(out / "cpu_bf16" / "cpu_bf16.json")],
        "wm_step_profile": ["benchmarks/wm_step_profile.py", "--data", str(out / "wm_step_profile" / "data"),
                            "--episodes", "6", "--steps", "1", "--loop-steps", "5", "--data-batches", "1",
                            "--no-compile", "--out", str(out / "wm_step_profile" / "wm_step_profile.json")],
        "wm_change_stats": ["benchmarks/wm_change_stats.py", "--data", str(out / "wm_evidence" / "data"), "--episodes", "4",
                            "--out", str(out / "wm_change_stats" / "wm_change_stats.json")],
        "wm_ablation": ["benchmarks/wm_ablation.py", "--preset", "pusht_cpu_debug", "--arms", "pred_v,inj_adaln",
                        "--seeds", "0", "--steps", "2", "--data", str(out / "wm_evidence" / "data"),
                        "--eval-windows", "4", "--rollout-episodes", "2", "--rollout-horizon", "6",
                        "--root", str(out / "wm_ablation" / "runs"), "--out", str(out / "wm_ablation" / "wm_ablation.json")],
        "wm_action_probe": ["benchmarks/wm_action_probe.py", "--overfit", "--seeds", "101", "--branches", "2",
                            "--max-steps", "2", "--eval-every", "2", "--batch", "2",
                            "--out", str(out / "wm_action_probe" / "wm_action_probe.json")],
        "wm_step_speed": ["benchmarks/wm_step_speed.py", "--ref", "HEAD", "--steps", "1",
                          "--out", str(out / "wm_step_speed" / "wm_step_speed.json")],
        "wm_speed_configs": ["benchmarks/wm_speed_configs.py", "--widths", "64", "96", "--depth", "2", "--steps", "1",
                             "--out", str(out / "wm_speed_configs" / "wm_speed_configs.json")],
        "drive_human_replay": ["benchmarks/drive_human_replay.py", "--k", "2", "--episodes", "1",
                               "--out", str(out / "drive_human_replay" / "drive_human_replay.json")],
        "discover_cpu_clock": ["benchmarks/discover_cpu_clock.py", "--budget-s", "4",
                               "--out", str(out / "discover_cpu_clock" / "discover_cpu_clock.json")],
        "discover_train": ["benchmarks/discover_train.py", "--steps", "1", "--rollouts", "4", "--max-new-tokens", "16"],
        "discover_step_speed": ["benchmarks/discover_step_speed.py", "--variants", "llama", "--rollouts", "2",
                                "--max-new-tokens", "8", "--gen-batch", "2", "--threads", "1",
                                "--runs", str(out / "discover_step_speed" / "runs"),
                                "--out", str(out / "discover_step_speed" / "step_speed.json")],
        "discover_ttt": ["benchmarks/discover_ttt.py", "--preset", "cpu_smollm2_blocks",
                         "--arms", "trained,frozen,random_blocks", "--seeds", "1", "--steps", "1",
                         "--rollouts-per-state", "2", "--max-new-tokens", "16", "--jobs", "0",
                         "--runs", str(out / "discover_ttt" / "runs"), "--out", str(out / "discover_ttt" / "discover_ttt.json"),
                         "--png", str(out / "discover_ttt" / "discover_ttt.png")],
        "discover_program_noise": ["benchmarks/discover_program_noise.py", "--programs", "0", "--random", "2",
                                   "--budget-s", "0.5", "--out", str(out / "discover_program_noise" / "noise.json"),
                                   "--png", str(out / "discover_program_noise" / "noise.png")],
        "discover_warm_pool": ["benchmarks/discover_warm_pool.py", "--pool", "10", "--tail", "0.2", "--budget-s", "0.3",
                               "--out", str(out / "discover_warm_pool" / "pool.json"),
                               "--png", str(out / "discover_warm_pool" / "pool.png")],
    }


def tree_digest(path: Path) -> str:
    """A digest of every file's path, size and content under `path`."""
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(path)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "bench")
    ap.add_argument("--only", default="", help="comma-separated figures (default: all)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per figure")
    ap.add_argument("--list", action="store_true", help="print {figure: script} as JSON and exit")
    a = ap.parse_args()
    cmds = quick_commands(a.out.resolve())
    if a.list:
        print(json.dumps({name: argv[0] for name, argv in cmds.items()}))
        return 0
    only = [s for s in a.only.split(",") if s]
    unknown = sorted(set(only) - set(cmds))
    if unknown:
        print(f"bench_all: error: unknown figure(s) {unknown}; known: {', '.join(cmds)}", file=sys.stderr)
        return 2
    before = tree_digest(RESULTS)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "MPLBACKEND": "Agg", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    rows, t_all = [], time.time()
    for name, argv in cmds.items():
        if only and name not in only:
            continue
        fig_dir = a.out / name
        shutil.rmtree(fig_dir, ignore_errors=True)  # every figure starts from nothing, so `make bench` reruns
        fig_dir.mkdir(parents=True, exist_ok=True)
        print(f"== {name}: python {' '.join(argv)}", flush=True)
        t0 = time.time()
        try:
            p = subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                               timeout=a.timeout)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = -1, e.stdout or "", f"timed out after {a.timeout:.0f} s"
            out = out if isinstance(out, str) else out.decode(errors="replace")
        (fig_dir / "stdout.txt").write_text(out)
        (fig_dir / "stderr.txt").write_text(err if isinstance(err, str) else err.decode(errors="replace"))
        lines = [ln for ln in out.splitlines() if ln.strip()]
        try:
            last = json.loads(lines[-1]) if lines else None
        except ValueError:
            last = None
        ok = rc == 0 and isinstance(last, dict)
        if ok:
            (fig_dir / "result.json").write_text(json.dumps(last) + "\n")
        rows.append({"figure": name, "ok": ok, "exit": rc, "seconds": round(time.time() - t0, 1)})
        print(f"   {'ok' if ok else 'FAILED'} ({rows[-1]['seconds']} s)" +
              ("" if ok else f": exit {rc}; see {fig_dir}/stderr.txt"), flush=True)
    untouched = tree_digest(RESULTS) == before
    if not untouched:
        print("bench_all: error: a benchmark wrote under benchmarks/results/", file=sys.stderr)
    summary = {"benchmark": "bench_all", "ok": all(r["ok"] for r in rows) and untouched, "results_untouched": untouched,
               "figures": rows, "wall_s": round(time.time() - t_all, 1), "out": str(a.out)}
    (a.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

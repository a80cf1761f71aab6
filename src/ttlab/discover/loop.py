"""The discovery loop: PUCT select -> propose -> sandbox -> verify -> tree, with resume.

Each step selects `states_per_step` states, asks the proposer for `samples_per_state` programs each, runs
them in the bounded sandbox pool, verifies every returned construction with the task (the only source of
scores), judges where it came from (`provenance.py`: a copy of a published reference, of a `--known` file
or of another lineage's state is recorded, earns nothing and never becomes a state), records each
expansion (failed ones too) in the tree, flushes, and saves `tree.json` and `best.json` atomically;
`results.jsonl` gets one line per evaluated program (parent, program hash, status, score, verdict).
`--resume` reloads the tree from the run directory and continues.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np

from ttlab.common.checkpoint import atomic_write_text
from ttlab.common.duration import parse_duration
from ttlab.common.logging import Logger
from ttlab.common.runs import make_run_dir
from ttlab.discover.advantages import group_advantages
from ttlab.discover.blocks import clock_wall_factor, log_tail, program_meta, with_blocks
from ttlab.discover.config import SearchConfig
from ttlab.discover.flags import check_search
from ttlab.discover.init_tree import load_verified_tree
from ttlab.discover.llm.http_proposer import HTTPProposer
from ttlab.discover.proposers import LibraryProposer, Proposer, library_programs, read_settings
from ttlab.discover.provenance import Judge, Known, program_hash
from ttlab.discover.puct import PUCTTree
from ttlab.discover.random_blocks import RandomBlocksProposer
from ttlab.discover.sandbox import Job, Limits, SandboxPool, batch_deadline_s, result_within
from ttlab.discover.tasks import get_task
from ttlab.discover.tasks.base import Task, VerifyResult
from ttlab.discover.tasks.erdos import AE_BAR, exact_c5_bounded


def best_record(task: Task, tree: PUCTTree) -> dict:
    """The best state, re-verified from its stored construction (never from the stored score)."""
    node = tree.best()
    if node is None:
        return {}
    res = task.verify(node.array())
    out = {"task": task.name, "valid": res.valid, "score": res.score, "reward": res.reward,
           "message": res.message, "node_id": node.id, "depth": node.depth,
           "higher_is_better": task.higher_is_better, "best_known": task.best_known,
           "construction": node.array().tolist(), "code": node.code,
           "provenance": {"program": node.program or program_hash(node.code), "parent": node.parent_id}}
    if task.name == "erdos" and res.valid:
        c, ok, msg = exact_c5_bounded(node.array())  # worker with a deadline, cached: paid once per new best
        out["exact"] = {"c5": float(c) if c is not None else None, "feasible": ok, "message": msg,
                        "beats_alphaevolve": bool(ok and c is not None and c < AE_BAR)}
    return out


DEFAULT_PROGRAM_WEIGHTS = {"erdos": "lse=3", "ac1": "lse=3", "ac2": "lse=3", "circle26": "slsqp=3", "circle32": "slsqp=3"}
"""Library proposer weights when --program-weights is empty: Erdős favours the smoothed minimax, the one
program that both finds new basins (graduated multistart) and descends at large n (see benchmarks/discover_search.py);
the autocorrelation tasks their smoothed programs; circle packing SLSQP on centres and radii jointly over the
LP on jittered centres."""


def parse_program_weights(spec: str, task: str) -> dict[str, float]:
    """`name=w,name=w` -> {name: w}; names must be library programs of the task, weights >= 0."""
    names = library_programs(task)
    out: dict[str, float] = {}
    for part in [p.strip() for p in spec.split(",") if p.strip()]:
        name, eq, w = part.partition("=")
        if not eq or name.strip() not in names:
            raise ValueError(f"--program-weights {spec!r}: {part!r} is not NAME=WEIGHT with NAME one of "
                             f"{', '.join(sorted(names))}")
        try:
            out[name.strip()] = float(w)
        except ValueError:
            raise ValueError(f"--program-weights {spec!r}: weight {w!r} is not a number") from None
        if out[name.strip()] < 0:
            raise ValueError(f"--program-weights {spec!r}: weights must be >= 0")
    if out and sum(out.get(n, 1.0) for n in names) <= 0:
        raise ValueError(f"--program-weights {spec!r}: every program has weight 0")
    return out


def parse_program_settings(spec: str, task: str) -> dict[str, dict]:
    """`{"program": {"key": value}}` -> the same dict, checked against the task's library programs."""
    if not spec:
        return {}
    try:
        out = json.loads(spec)
    except json.JSONDecodeError as e:
        raise ValueError(f"--program-settings is not JSON: {e}") from None
    programs = library_programs(task)
    if not isinstance(out, dict) or not all(isinstance(v, dict) for v in out.values()):
        raise ValueError(f"--program-settings must be a JSON object of objects, e.g. "
                         f"'{{\"lse\": {{\"hop_frac\": 0.25}}}}'; got {spec!r}")
    for name, pins in out.items():
        if name not in programs:
            raise ValueError(f"--program-settings: {name!r} is not a library program of {task} "
                             f"({', '.join(sorted(programs))})")
        unknown = sorted(set(pins) - set(read_settings(programs[name])))
        if unknown:
            raise ValueError(f"--program-settings: {name} has no setting(s) {', '.join(unknown)}")
    return out


def make_proposer(cfg: SearchConfig) -> Proposer:
    if cfg.proposer == "library":
        spec = cfg.program_weights or DEFAULT_PROGRAM_WEIGHTS.get(cfg.task, "")
        pinned = parse_program_settings(cfg.program_settings, cfg.task)
        if cfg.program_wall_factor != 1.0:  # CPU-budgeted programs learn their wall backstop from SETTINGS
            for name, src in library_programs(cfg.task).items():
                if "wall_factor" in read_settings(src):
                    pinned.setdefault(name, {}).setdefault("wall_factor", cfg.program_wall_factor)
        return LibraryProposer(cfg.task, seed=cfg.seed, weights=parse_program_weights(spec, cfg.task), pinned=pinned)
    if cfg.proposer == "random_blocks":
        return RandomBlocksProposer(cfg.task, seed=cfg.seed, wall_factor=cfg.program_wall_factor)
    if cfg.proposer == "http":
        return HTTPProposer(cfg.http, task=get_task(cfg.task), seed=cfg.seed)
    raise ValueError(f"--proposer {cfg.proposer!r}: this command knows `library`, `random_blocks` and `http`; the trained LLM "
                     "proposer runs via `ttlab discover train`")


def run_search(cfg: SearchConfig, proposer: Proposer | None = None, log=print, on_step=None) -> dict:
    """Run the loop; returns the best record (also written to <run>/best.json). `on_step(dict)` is called after
    every step with step, t (s), evals, valid and best_score (benchmarks record best-vs-time with it)."""
    budget = parse_duration(cfg.time_limit) or float("inf")
    cpu_budget = parse_duration(cfg.cpu_budget, "--cpu-budget") or math.inf
    check_search(cfg)
    task = get_task(cfg.task)
    proposer = proposer or make_proposer(cfg)  # before the run dir: a bad flag leaves nothing behind
    known = Known.for_task(task, cfg.known)
    start = (load_verified_tree(cfg.init_tree, task, cfg.puct_c, cfg.keep_children, cfg.max_roots)
             if cfg.init_tree and not cfg.resume else None)  # before the run dir, like the proposer
    run = make_run_dir("discover", cfg, cfg.run_name, cfg.root, cfg.resume)
    tree_path = run.file("tree.json")
    if cfg.resume and tree_path.exists():
        tree = PUCTTree.load(tree_path)
        log(f"resumed {tree_path}: {len(tree.nodes)} states, {tree.total} expansions, step {tree.step}")
    elif start is not None:
        tree = start
        log(f"started from {cfg.init_tree}: {len(tree.nodes)} states, best {task.name} score "
            f"{tree.best().score:.9f}")
    else:
        tree = PUCTTree(cfg.puct_c, cfg.keep_children, cfg.max_roots)
        for x in task.initial_states(np.random.default_rng(cfg.seed), cfg.init_states):
            r = task.verify(x)
            if not r.valid:
                raise RuntimeError(f"task {task.name}: an initial state is invalid ({r.message})")
            tree.add_root(r.construction, r.reward, r.score)
    logger = Logger(run.path)
    t0 = time.time()
    evals = valid_n = 0
    cpu_used = 0.0  # the programs' CPU seconds (as they report them; wall seconds when they do not)
    wf = max(cfg.program_wall_factor, clock_wall_factor(cfg.program_clock))
    limits = Limits(wall_s=cfg.program_budget_s + cfg.grace_s, memory_mb=cfg.memory_mb)
    judge = Judge(task, known)
    with SandboxPool(cfg.workers, limits) as pool:
        log(f"sandbox: {pool.caps}; run dir {run.path}")
        log(f"provenance: {len(known)} known constructions ({', '.join(known.labels()) or 'none'})")
        steps = 0
        while True:
            left = budget - (time.time() - t0)
            if left < 1.0 or cpu_budget - cpu_used < 1.0 or (cfg.max_steps and steps >= cfg.max_steps):
                break
            states = tree.select(cfg.states_per_step, cfg.roots_first)
            props = proposer.propose(states, cfg.samples_per_state)
            rounds = math.ceil(len(props) / cfg.workers)
            pb = max(0.5, min(cfg.program_budget_s, (left / rounds - 1.0) / wf,
                              (cpu_budget - cpu_used) / len(props) - 1.0))
            futs = [pool.submit(Job(with_blocks(p.code, cfg.program_clock), tree.nodes[p.state_id].array(), pb,
                                    seed=cfg.seed * 100003 + tree.total + i),
                                Limits(wall_s=wf * pb + cfg.grace_s, memory_mb=cfg.memory_mb)) for i, p in enumerate(props)]
            rewards, valids, groups, fails, lines, programs = [], [], [], {}, [], []
            deadline = time.monotonic() + batch_deadline_s(len(futs), cfg.workers, Limits(wall_s=wf * pb + cfg.grace_s))
            for p, f in zip(props, futs, strict=True):
                sr = result_within(f, deadline - time.monotonic())
                evals += 1
                meta = program_meta(sr.stdout)
                cpu_s = min(max(meta.get("cpu_s", sr.wall_s), 0.0), wf * pb + cfg.grace_s + 1.0)  # a report: clamped
                cpu_used += cpu_s
                vr = task.verify(sr.output, sr.reported_score) if sr.ok else VerifyResult(False, float("nan"), 0.0, {}, sr.reason)
                prov = (judge.judge(tree, p.state_id, vr.construction, p.code) if vr.valid
                        else judge.failed(p.state_id, p.code))
                tree.record_expansion(p.state_id)
                node = None
                if prov.verdict == "new":
                    node = tree.add_child(p.state_id, vr.construction, vr.reward, vr.score, p.code, sr.stdout,
                                          prov.program)
                elif prov.verdict == "same":
                    tree.credit(p.state_id, vr.reward)
                if prov.counted:
                    valid_n += 1
                else:
                    key = "copy" if prov.verdict == "copy" else sr.status if not sr.ok else "invalid"
                    fails[key] = fails.get(key, 0) + 1
                rewards.append(vr.reward if prov.counted else 0.0)
                valids.append(prov.counted)
                groups.append(p.state_id)
                lines.append({"step": tree.step, **prov.record(), "status": sr.status, "valid": vr.valid,
                              "score": vr.score if vr.valid else None, "node": node.id if node else None})
                programs.append({"status": sr.status, "score": vr.score if vr.valid else None, "budget_s": round(pb, 3),
                                 "cpu_s": round(cpu_s, 3), "wall_s": round(sr.wall_s, 3), "cpu_reported": "cpu_s" in meta,
                                 "log": log_tail(sr.stdout)})
            adv, keep = group_advantages(np.array(rewards), np.array(valids), groups)
            tree.flush()
            tree.save(tree_path)
            with open(run.file("results.jsonl"), "a") as fh:  # after the tree: a kill loses lines, never doubles them
                fh.writelines(json.dumps(x) + "\n" for x in lines)
            rec = best_record(task, tree)
            atomic_write_text(run.file("best.json"), json.dumps(rec) + "\n")
            steps += 1
            elapsed = time.time() - t0
            logger.scalars({"search/best_score": rec.get("score", float("nan")), "search/evals": evals,
                            "search/valid_frac": valid_n / max(evals, 1), "search/tree_size": len(tree.nodes),
                            "search/adv_kept_frac": float(keep.mean()) if keep.size else 0.0}, tree.total)
            if on_step is not None:
                on_step({"step": tree.step, "t": elapsed, "evals": evals, "valid": valid_n,
                         "best_score": rec.get("score", float("nan")), "cpu_s": cpu_used, "programs": programs})
            log(f"step {tree.step:4d}  t={elapsed:6.0f}s  cpu={cpu_used:6.0f}s  evals={evals}  valid={valid_n}  "
                f"fails={fails or '-'}  best {task.name} score={rec.get('score', float('nan')):.9f}")
    logger.close()
    rec = best_record(task, tree)
    rec.update({"evals": evals, "valid": valid_n, "elapsed_s": time.time() - t0, "programs_cpu_s": cpu_used,
                "run_dir": str(run.path)})
    atomic_write_text(run.file("best.json"), json.dumps(rec) + "\n")
    log(f"best {task.name}: {rec.get('message')} -> {Path(run.path) / 'best.json'}")
    return rec

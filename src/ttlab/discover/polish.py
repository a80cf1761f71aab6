"""`ttlab discover polish TASK FILE`: improve a given construction under the search's rules.

A library optimiser program (default: the Erdős minimax SLP) runs in the sandbox in rounds of `round_s`
seconds, each round starting from the best construction so far. Every returned construction is re-verified
by the task (the program's own numbers are never used); a round's result is kept only when the verified
score improves and it is not a known construction (`provenance.py`: a round that returns, after the task's
normalisation, a published reference, a `--known` construction or the start itself is recorded as a copy
and never kept), and the best construction is written (atomically) after every improving round, so a kill
loses at most the round in flight. The record names the program's hash and the start it was polished from.
For Erdős the final construction is checked in exact rational arithmetic, and `--claim` checks a claimed
bound exactly.
"""

from __future__ import annotations

import json
import time
from fractions import Fraction

import numpy as np

from ttlab.common.checkpoint import atomic_write_text
from ttlab.common.data import repo_relative
from ttlab.common.duration import parse_duration
from ttlab.common.errors import UserError
from ttlab.common.outdir import writable_parent
from ttlab.discover.blocks import with_blocks
from ttlab.discover.config import PolishConfig
from ttlab.discover.constructions import load_constructions
from ttlab.discover.flags import check_polish
from ttlab.discover.proposers import library_programs, read_settings, render
from ttlab.discover.provenance import Known, program_hash
from ttlab.discover.sandbox import Limits, run_program
from ttlab.discover.tasks import get_task
from ttlab.discover.tasks.erdos import check_record, exact_c5


def pick(task, items: list[tuple], name: str) -> tuple[str, np.ndarray, float]:
    """The named construction, or the best valid one; returns (name, array, verified score)."""
    scored = []
    for n, arr, *_ in items:
        if name and n != name:
            continue
        res = task.verify(arr)
        if res.valid:
            scored.append((n, np.asarray(res.construction, dtype=np.float64), res.score))
        elif name:
            raise ValueError(f"construction {n!r} is not valid: {res.message}")
    if not scored:
        raise ValueError(f"no construction named {name!r}" if name else "no valid construction in the file")
    sign = -1.0 if task.higher_is_better else 1.0
    return min(scored, key=lambda x: sign * x[2])


def exactly_feasible(h: np.ndarray) -> np.ndarray:
    """Erdős: h whose exact rescale stays <= 1 (float rounding can leave the max a little above 1).

    The exact shortfall n max(h) / 2 - sum(h) (zero or a few ulps of the sum, more when pieces sit at 1) is
    added to the piece nearest 0.5, rounded up, then a few ulps more until n max(h) <= 2 sum(h) holds in
    exact arithmetic; the max is untouched, so the function changes by about the shortfall and C5 is
    recomputed afterwards."""
    h = np.asarray(h, dtype=np.float64).copy()
    n = h.size
    j = int(np.argmin(np.abs(h - 0.5)))
    fr = [Fraction(float(x)) for x in h]
    need = n * max(fr) / 2 - sum(fr)
    if need > 0:
        target = Fraction(float(h[j])) + need
        x = float(target)
        h[j] = x if Fraction(x) >= target else np.nextafter(x, 1.0)
    for _ in range(200):
        fr = [Fraction(float(x)) for x in h]
        if n * max(fr) <= 2 * sum(fr):
            return h
        h[j] = np.nextafter(h[j] + 4 * np.spacing(h[j]), 1.0)
    raise ValueError("could not make the construction exactly feasible")


def record(task, h: np.ndarray, score: float, history: list[dict], claim: str) -> dict:
    if task.name == "erdos":
        h = exactly_feasible(h)
        score = task.verify(h).score
    out = {"task": task.name, "score": score, "n": int(h.size), "construction": h.tolist(), "history": history}
    if task.name == "erdos":
        c, ok, msg = exact_c5(h)
        out["exact"] = {"c5": float(c), "c5_fraction": f"{c.numerator}/{c.denominator}", "feasible": ok,
                        "message": msg}
        if claim:
            holds, _, cmsg = check_record(h, claim)
            out["exact"]["claim"] = {"claim": claim, "holds": holds, "message": cmsg}
    return out


def run_polish(cfg: PolishConfig, log=print) -> dict:
    task = get_task(cfg.task)
    programs = library_programs(task.name)
    if cfg.program not in programs:
        raise ValueError(f"--program {cfg.program!r}: task {task.name} has {', '.join(sorted(programs))}")
    check_polish(cfg)
    budget = parse_duration(cfg.time_limit)
    if budget <= 0:
        raise UserError("--time-limit: polish needs a time limit (e.g. 5m)")
    writable_parent("--out", cfg.out)  # before the search, so its result cannot be lost at the end
    name, best, best_score = pick(task, load_constructions(cfg.file), cfg.name)
    start_score = best_score
    known = Known.for_task(task, cfg.known)
    known.add(f"start:{name}", best)
    if cfg.upsample > 1:
        best = np.repeat(best, cfg.upsample)
        res = task.verify(best)
        best, best_score = np.asarray(res.construction, dtype=np.float64), res.score
    src = programs[cfg.program]
    settings = read_settings(src)
    settings.update({k: v for k, v in {"start": "parent", "refine": 0}.items() if k in settings})
    if cfg.settings:
        try:
            extra = json.loads(cfg.settings)
        except json.JSONDecodeError as e:
            raise ValueError(f"--settings is not JSON: {e}") from None
        unknown = sorted(set(extra) - set(settings)) if isinstance(extra, dict) else None
        if unknown is None or unknown:
            raise ValueError(f"--settings must be a JSON object of the program's keys ({', '.join(sorted(settings))}); "
                             f"got {cfg.settings!r}")
        settings.update(extra)
    code = with_blocks(render(src, settings))  # the Erdős programs import the building blocks
    provenance = {"program": program_hash(code), "parent": name, "file": repo_relative(cfg.file)}
    sign = -1.0 if task.higher_is_better else 1.0
    log(f"polish {task.name}: {name} (n={best.size}) verified {best_score:.10f}; program {cfg.program}, "
        f"budget {budget:.0f}s in rounds of {cfg.round_s:.0f}s -> {cfg.out}")
    history = [{"round": 0, "t": 0.0, "score": best_score, "kept": True, "status": "start"}]
    t0 = time.time()
    r = 0
    while True:
        left = budget - (time.time() - t0)
        if left < 2.0:
            break
        r += 1
        pb = min(cfg.round_s, left - 1.0)
        limits = Limits(wall_s=pb + 15.0, memory_mb=cfg.memory_mb)
        sr = run_program(code, parent=best, budget_s=pb, seed=cfg.seed + r, limits=limits)
        entry = {"round": r, "t": round(time.time() - t0, 1), "status": sr.status, "kept": False}
        if sr.ok:
            vr = task.verify(sr.output)
            entry["score"] = vr.score if vr.valid else None
            copy_of = known.match(task.normal_forms(vr.construction)) if vr.valid else None
            if copy_of is not None:
                entry["verdict"] = "same" if copy_of == f"start:{name}" else "copy"
                entry["copy_of"] = copy_of
            elif vr.valid:
                entry["verdict"] = "new"
            if vr.valid and copy_of is None and sign * (vr.score - best_score) < 0:
                best, best_score = np.asarray(vr.construction, dtype=np.float64), vr.score
                entry["kept"] = True
                cfg.out.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_text(cfg.out, json.dumps(record(task, best, best_score, history + [entry], "")
                                                      | {"provenance": provenance}) + "\n")
            elif not vr.valid:
                entry["reason"] = vr.message
        else:
            entry["reason"] = sr.reason
        history.append(entry)
        log(f"round {r}: {sr.status} {entry.get('score')} {'kept' if entry['kept'] else ''}  best {best_score:.12f}")
    rec = record(task, best, best_score, history, cfg.claim)
    rec.update({"start": {"name": name, "score": start_score}, "provenance": provenance,
                "elapsed_s": round(time.time() - t0, 1)})
    cfg.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(cfg.out, json.dumps(rec) + "\n")
    ex = rec.get("exact")
    log(f"best {task.name}: {best_score:.12f} (start {start_score:.12f})"
        + (f"; exact C5 {ex['c5']:.15f} feasible={ex['feasible']}" if ex else "") + f" -> {cfg.out}")
    if ex and "claim" in ex:
        log(f"exact check of claim {cfg.claim}: {'HOLDS' if ex['claim']['holds'] else 'FAILS'} ({ex['claim']['message']})")
    return rec

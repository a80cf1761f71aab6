"""A scored pool of random-blocks programs, for a warm start that imitates the better ones (rejection sampling).

The plain blocks warm start imitates the random-blocks grammar as drawn, so a valid program of the frozen model
is at best a random-blocks draw. The filtered warm start (`WarmStartConfig.top_frac < 1`) first scores `pool`
grammar programs in the sandbox, each run once from the first root of the TUNING seed (`pool_seed`, never an
evaluation seed) on the work clock (a program's score does not depend on the load), and then trains only on the
best `top_frac` of them by verified C5 (plus the rest at weight `rest_weight`, 0 by default).

    pool = cached_pool(cfg.warm)                 # [{"code", "choices", "c5", "seed", ...}], scored once, cached
    codes, w = select(pool, top_frac=0.25)       # the SFT's completions and their sampling weights

The pool is cached as JSON under `<cache>/warmpool/<pool_key>.json`, keyed by the pool's settings and the
source of the grammar and of the blocks module, so the benchmark that measures the pool and the warm start that
trains on it share one scoring.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import time
from dataclasses import asdict, replace

import numpy as np

from ttlab.common.checkpoint import atomic_write_text
from ttlab.discover import random_blocks
from ttlab.discover.blocks import CLOCKS, clock_wall_factor, erdos_blocks, program_meta, with_blocks
from ttlab.discover.config import WarmStartConfig
from ttlab.discover.llm.models import cache_root
from ttlab.discover.sandbox import Job, Limits, SandboxPool
from ttlab.discover.tasks import get_task

POOL_FIELDS = ("top_frac", "rest_weight", "pool", "pool_seed", "pool_budget_s", "pool_clock", "pool_workers",
               "pool_refined", "pool_parents")
"""The WarmStartConfig fields of the filter; they enter a warm start's key only when the filter is on."""


def filtered(cfg: WarmStartConfig) -> bool:
    return cfg.top_frac < 1.0


def check(cfg: WarmStartConfig) -> None:
    """One-line errors for a bad filter."""
    if not 0.0 < cfg.top_frac <= 1.0:
        raise ValueError(f"warm start: --warm.top-frac {cfg.top_frac} must lie in (0, 1]")
    if not 0.0 <= cfg.rest_weight <= 1.0:
        raise ValueError(f"warm start: --warm.rest-weight {cfg.rest_weight} must lie in [0, 1]")
    if filtered(cfg) and cfg.pool < 4:
        raise ValueError(f"warm start: --warm.pool {cfg.pool}: a filter needs a pool of at least 4 programs")
    if any(not 0.0 <= q <= 1.0 for q in cfg.pool_parents) or len(set(cfg.pool_parents)) < len(cfg.pool_parents):
        raise ValueError(f"warm start: --warm.pool-parents {list(cfg.pool_parents)}: distinct quantiles in [0, 1]")
    if cfg.pool_parents and not filtered(cfg):
        raise ValueError("warm start: --warm.pool-parents needs a filter (--warm.top-frac < 1)")
    if not 0.0 <= cfg.root_restart <= 1.0:
        raise ValueError(f"warm start: --warm.root-restart {cfg.root_restart} must lie in [0, 1]")
    if cfg.root_restart and filtered(cfg):
        raise ValueError("warm start: --warm.root-restart shapes the grammar's draws; a filter (--warm.top-frac < 1) "
                         "draws from the scored pool instead")
    if cfg.pool_clock not in CLOCKS:
        raise ValueError(f"warm start: --warm.pool-clock {cfg.pool_clock!r} (one of {', '.join(CLOCKS)})")


def key_fields(cfg: WarmStartConfig) -> dict:
    """The config as it enters a warm start's key: without the filter's fields when the filter is off, so an
    unfiltered warm start keeps the key it had before the filter existed."""
    d = asdict(cfg)
    if not filtered(cfg):
        for k in POOL_FIELDS:
            d.pop(k, None)
    if not cfg.root_restart:
        d.pop("root_restart", None)  # (absent when off: the warm starts built before it keep their keys)
    return d


def pool_key(cfg: WarmStartConfig) -> str:
    """The pool's cache key: its size, seed, budget, clock, parents, and the sources that decide a program's score."""
    d = {"pool": cfg.pool, "seed": cfg.pool_seed, "budget_s": cfg.pool_budget_s, "clock": cfg.pool_clock,
         "grammar": inspect.getsource(random_blocks), "blocks": inspect.getsource(erdos_blocks)}
    if cfg.pool_refined:
        d["refined"] = True  # (absent otherwise: a root-only pool keeps its key)
    if cfg.pool_parents:
        d["parents"] = [float(q) for q in cfg.pool_parents]  # (absent otherwise, likewise)
    return hashlib.sha1(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]


def tuning_root(seed: int) -> np.ndarray:
    """The first root of `seed` (what the trainer's and the search's trees start from)."""
    task = get_task("erdos")
    return np.asarray(task.verify(task.initial_states(np.random.default_rng(seed), 1)[0]).construction, dtype=np.float64)


def draw(n: int, seed: int) -> list[tuple[str, dict]]:
    """`n` random-blocks programs (source, choices), deterministic in `seed`."""
    rng = np.random.default_rng([seed, 17])
    return [random_blocks.random_program(rng) for _ in range(n)]


def score(codes: list[str], parent: np.ndarray, seeds: list[int], budget_s: float, clock: str, workers: int,
          grace_s: float = 5.0, memory_mb: int = 2048, log=print) -> list[dict]:
    """Run each program once from `parent` with its seed; {"c5" (None: invalid), "status", "work_s", "wall_s"}."""
    task = get_task("erdos")
    limits = Limits(wall_s=clock_wall_factor(clock) * budget_s + grace_s, memory_mb=memory_mb)
    out: list[dict] = []
    t0 = time.time()
    with SandboxPool(workers, limits) as pool:
        futs = [pool.submit(Job(with_blocks(c, clock), parent, budget_s, seed=int(s))) for c, s in zip(codes, seeds, strict=True)]
        for i, f in enumerate(futs):
            sr = f.result()
            vr = task.verify(sr.output, sr.reported_score) if sr.ok else None
            meta = program_meta(sr.stdout)
            out.append({"c5": vr.score if vr is not None and vr.valid else None, "status": sr.status,
                        "wall_s": round(sr.wall_s, 3), **{k: meta[k] for k in ("cpu_s", "work_s", "wall_stops") if k in meta}})
            if (i + 1) % 32 == 0:
                log(f"warm pool: scored {i + 1}/{len(codes)} ({time.time() - t0:.0f} s)")
    return out


def build_pool(cfg: WarmStartConfig, log=print) -> list[dict]:
    """Draw and score the pool of `cfg` (no cache)."""
    progs = draw(cfg.pool, cfg.pool_seed)
    seeds = [1000 + i for i in range(len(progs))]
    res = score([c for c, _ in progs], tuning_root(cfg.pool_seed), seeds, cfg.pool_budget_s, cfg.pool_clock,
                cfg.pool_workers, log=log)
    return [{"code": c, "choices": ch, "seed": s, **r} for (c, ch), s, r in zip(progs, seeds, res, strict=True)]


def rerun(pool: list[dict], i: int, cfg: WarmStartConfig) -> np.ndarray:
    """Program `i`'s construction: the program run again from the tuning root with its pool seed (the work clock
    makes the run repeat the pool's), its output rescaled as the verifier does."""
    task = get_task("erdos")
    limits = Limits(wall_s=clock_wall_factor(cfg.pool_clock) * cfg.pool_budget_s + 5.0, memory_mb=2048)
    with SandboxPool(1, limits) as sp:
        sr = sp.submit(Job(with_blocks(pool[i]["code"], cfg.pool_clock), tuning_root(cfg.pool_seed), cfg.pool_budget_s,
                           seed=int(pool[i]["seed"]))).result()
    vr = task.verify(sr.output, sr.reported_score) if sr.ok else None
    if vr is None or not vr.valid:
        raise RuntimeError(f"warm pool: program {i} did not run again ({sr.status})")
    return np.asarray(vr.construction, dtype=np.float64)


def refined_parent(pool: list[dict], cfg: WarmStartConfig) -> tuple[np.ndarray, int]:
    """(construction, index): the root pool's best program's output (`rerun`)."""
    i = int(np.argmin(ranks(pool)))
    return rerun(pool, i, cfg), i


def graded_index(pool: list[dict], q: float) -> int:
    """The pool program at quantile `q` of the valid programs' C5 from the root (0: the best, 1: the worst)."""
    r = ranks(pool)
    n_valid = sum(p["c5"] is not None for p in pool)
    if n_valid == 0:
        raise ValueError("warm pool: no valid program to take a graded parent from")
    return int(np.flatnonzero(r == int(round(q * (n_valid - 1))))[0])


def graded_field(q: float) -> str:
    """The pool field holding every program's C5 from the parent at quantile `q`."""
    return f"c5_from_q{q:g}"


def add_graded(pool: list[dict], cfg: WarmStartConfig, log=print) -> list[dict]:
    """The pool with every program also scored from the output of the program at each quantile of
    `cfg.pool_parents` (`graded_field(q)`, same program seeds), so a child prompt can show a parent of known
    quality and teach what scores from it: a restart from a poor parent, a refinement of a good one."""
    out = [dict(p) for p in pool]
    for q in cfg.pool_parents:
        i = graded_index(pool, q)
        parent = rerun(pool, i, cfg)
        log(f"warm pool: scoring {len(pool)} programs from the parent at quantile {q:g} (program {i}, "
            f"C5 {pool[i]['c5']:.6f})")
        res = score([p["code"] for p in pool], parent, [p["seed"] for p in pool], cfg.pool_budget_s, cfg.pool_clock,
                    cfg.pool_workers, log=log)
        for p, r in zip(out, res, strict=True):
            p[graded_field(q)] = r["c5"]
    return out


def add_refined(pool: list[dict], cfg: WarmStartConfig, log=print) -> list[dict]:
    """The pool with every program also scored from `refined_parent` (`c5_refined`, same program seeds)."""
    parent, i = refined_parent(pool, cfg)
    c5 = get_task("erdos").verify(parent).score
    log(f"warm pool: scoring {len(pool)} programs again from the refined parent (program {i}'s output, C5 {c5:.6f})")
    res = score([p["code"] for p in pool], parent, [p["seed"] for p in pool], cfg.pool_budget_s, cfg.pool_clock,
                cfg.pool_workers, log=log)
    return [{**p, "c5_refined": r["c5"], "refined_parent": i, "refined_parent_c5": c5} for p, r in zip(pool, res, strict=True)]


def cached_pool(cfg: WarmStartConfig, log=print) -> list[dict]:
    """The scored pool of `cfg`, from the cache or scored now (and cached); a refined pool starts from the cached
    root-only pool of the same settings, and a graded pool from the cached pool without its graded parents."""
    check(cfg)
    path = cache_root() / "warmpool" / f"{pool_key(cfg)}.json"
    if path.is_file():
        log(f"warm pool: loaded {path}")
        return json.loads(path.read_text())["programs"]
    if len(cfg.pool_parents) > 1:  # one cache file per graded parent, so settings that share a parent share it
        progs = [dict(p) for p in cached_pool(replace(cfg, pool_parents=()), log)]
        for q in cfg.pool_parents:
            one = cached_pool(replace(cfg, pool_parents=(q,)), log)
            for p, o in zip(progs, one, strict=True):
                p[graded_field(q)] = o[graded_field(q)]
        return progs
    if cfg.pool_parents:
        progs = add_graded(cached_pool(replace(cfg, pool_parents=()), log), cfg, log)
        atomic_write_text(path, json.dumps({"key": pool_key(cfg), "programs": progs}))
        return progs
    if cfg.pool_refined:
        progs = add_refined(cached_pool(replace(cfg, pool_refined=False), log), cfg, log)
        atomic_write_text(path, json.dumps({"key": pool_key(cfg), "programs": progs}))
        return progs
    log(f"warm pool: scoring {cfg.pool} random-blocks programs on the tuning seed {cfg.pool_seed}")
    progs = build_pool(cfg, log)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps({"key": pool_key(cfg), "programs": progs}))
    return progs


def ranks(pool: list[dict], field: str = "c5") -> np.ndarray:
    """Each program's rank by `field` (C5 from the root, or `c5_refined`; 0 = best; invalid programs after every
    valid one, in pool order)."""
    c5 = np.array([p[field] if p[field] is not None else np.inf for p in pool])  # (N,)
    order = np.argsort(c5, kind="stable")
    r = np.empty(len(pool), dtype=np.int64)
    r[order] = np.arange(len(pool))
    return r


def select(pool: list[dict], top_frac: float, rest_weight: float = 0.0, field: str = "c5"
           ) -> tuple[list[str], np.ndarray]:
    """(codes, weights): the valid programs with weight 1 for the best ceil(top_frac * N) by `field` and
    `rest_weight` for the other valid ones (programs of weight 0 are dropped)."""
    r = ranks(pool, field)
    k = int(np.ceil(top_frac * len(pool)))
    codes, w = [], []
    for p, rk in zip(pool, r, strict=True):
        if p[field] is None:
            continue
        wt = 1.0 if rk < k else rest_weight
        if wt > 0:
            codes.append(p["code"])
            w.append(wt)
    if not codes:
        raise ValueError("warm pool: no valid program passes the filter")
    return codes, np.asarray(w, dtype=np.float64)

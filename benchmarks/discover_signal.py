"""Does a composed Erdős block program's text predict its reward? Cross-validated, numpy only. Prints ONE JSON
line last.

Test-time training can only beat a frozen sampler if the program text carries information about the reward
beyond luck: which start a program makes (`restart`, `coarsen`, `parent`, read as `discover_choices.py` does),
which stages it runs and the numbers it writes (sigma, temperature, tau, tau0, delta, window, sym, stage ends,
multistart size, coarsening factor, max_n, ...). This measures how much, on the programs already run:

  - `pool`: the warm-start pool (`discover_warm_pool.py`: random-blocks programs all run from the same root).
    Targets: `best_quarter` (C5 in the pool's best quarter) and `c5_gain` (the pool's median C5 minus the
    program's: > 0 is better). Plain K-fold. `top_tail_rerun`: the programs of the pool's best tail (chosen on
    their one score) rerun with another seed (its `rescore`): how much of a top program's edge survives a new seed.
  - `children`: the programs written for a state that is not a root (a later step's parent) in the given
    `discover_ttt.py` runs, per arm and all arms together; folds grouped by run (a run's programs are never split
    between training and test). Targets over the valid programs: `beat_parent` (its C5 below the parent's),
    `gain` (the parent's C5 minus its own), `above_siblings` (its gain above the median of the programs written
    for the same parent at the same step: the parent's own difficulty taken out, what a group baseline sees);
    and `valid` over all programs (LLM arms only: the random proposer is always valid). Invalid programs are
    counted per start (`valid_by_start`).

Features (`feature_table`): the start one-hot, the stages present and their count, the numeric settings (log10
for the scales, log2 for the sizes; several hops: their mean), a missing setting filled with the column median
plus a missing indicator. Feature sets: `start` (the start one-hot only), `all`. Models: a ridge (continuous) or
L2 logistic (binary, IRLS) regression and a k-nearest-neighbour mean on standardised features. Reported from the
out-of-fold predictions: `auc` (binary) or `spearman` and `r2` (continuous; fitted and scored on the target
winsorised at its 2nd/98th percentile, the gains having a long tail), and `oracle_pick`: per held-out fold the
mean raw target of the top 10% programs ranked by the model minus the fold's mean (what a sampler that knew this
predictor would gain per program; `oracle_pick_positive` for the continuous targets: the same on the target's
positive part, a program's own improvement, the disasters it avoids not counted). Controls: `shuffled` (the same
pipeline with the labels permuted (within each run where the folds are grouped by run), `--perms` times: mean, sd, `p` = the share of permutations at least as good (at
best 1/(perms+1)) and `z`) and, for `all`, `within_start` (every setting column permuted together within each
start, the start and labels kept): `all` above `within_start` is signal beyond the start type. `coef`: the linear
model's eight largest weights, fitted on every row (standardised features; a description, not cross-validated).

Runs are read as `discover_gap.py` reads them (LLM arms from `samples.jsonl`, the random proposer's texts
regenerated from its seed); a missing run folder is skipped with a warning, a run whose rows are the same as an
earlier one's (a frozen or random arm rerun under another tag) is dropped as a duplicate.

    python benchmarks/discover_signal.py --tags restart restart_sg restart_sg_kl1 work_s7 \
        --seeds 7 8 9 10 11 12 13 --arms trained frozen random_blocks \
        --pool benchmarks/results/discover_warm_pool/pool.json --out benchmarks/results/discover_ttt/signal.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
from pathlib import Path

import numpy as np

from ttlab.common.result_file import emit_result
from ttlab.discover.program_settings import settings_in
from ttlab.discover.starts import STARTS, start_of

sys.path.insert(0, str(Path(__file__).resolve().parent))
from discover_gap import text_reader  # noqa: E402  (a benchmark script, importable for its functions)

START_COLS = tuple(f"start_{s}" for s in STARTS)
STAGE_KINDS = ("hop", "up_hop", "continuation", "converge", "lp_polish", "symmetrise")
API = {"Clock", "normalise", "coarsen", "multistart", "random_start", "smooth_start", "symmetrise", "upsample",
       "hop", "continuation", "converge", "lp_polish", "refine", "report", "finish", "FINE_TAUS", "HOP_TAUS"}
NUMERIC = ("temperature", "sigma", "tau", "tau0", "delta", "window", "sym", "monotone_share", "n0", "coarsen",
           "start_end", "first_end", "last_end", "max_n")
_CALL = re.compile(r"\beb\.(\w+)\(")
_UNTIL = re.compile(r"clock\.until\(\s*(-?\d+\.?\d*(?:[eE]-?\d+)?)\s*\)")
_SYM = re.compile(r"\bsym=(-?\d+\.?\d*(?:[eE]-?\d+)?)(?![\w.(])")
_TEMP = re.compile(r"\btemperature=(-?\d+\.?\d*(?:[eE]-?\d+)?)(?![\w.(])")
_N0 = re.compile(r"eb\.multistart\(\s*(\d+)")
_COARSEN = re.compile(r"eb\.coarsen\(\s*\w+\s*,\s*(\d+)")
_MAX_N = re.compile(r"eb\.refine\([^,]+,[^,]+\)\s*,\s*(\d+)")
TOP = 0.1


# ------------------------------------------------------------------------------------------------ features

def body_of(code: str) -> str:
    """The program after the shared head (the lines after `eb.normalise(`), or the text as is if it has none."""
    lines = (code or "").splitlines()
    head = next((i for i, ln in enumerate(lines) if "eb.normalise(" in ln), None)
    return (code or "") if head is None else "\n".join(lines[head + 1:])


def _code_lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith(("#", "```"))]


def program_features(text: str) -> dict[str, float]:
    """{name: value} of one program body; NaN where the program has no such setting (see the module docstring)."""
    text = body_of(text)
    nan = float("nan")
    f: dict[str, float] = dict.fromkeys(START_COLS, 0.0)
    f[f"start_{start_of(text)}"] = 1.0
    lines = _code_lines(text)
    kinds: list[str] = []
    ends: list[float] = []  # the stage ends, in the order written (not the multistart's, not the refine's)
    start_end, unknown = nan, 0
    for ln in lines:
        calls = _CALL.findall(ln)
        unknown += sum(c not in API for c in calls)
        until = [float(x) for x in _UNTIL.findall(ln)]
        if "multistart" in calls:
            start_end = until[0] if until else nan
            continue
        kind = ("up_hop" if "upsample" in calls else "hop") if "hop" in calls else next(
            (k for k in STAGE_KINDS if k in calls), None)
        if kind is None:
            continue
        kinds.append(kind)
        if until:
            ends.append(until[0])
    for k in STAGE_KINDS:
        f[f"stage_{k}"] = float(k in kinds)
    f["n_stages"] = float(sum(k != "symmetrise" for k in kinds))
    prev, stalled = (0.0 if math.isnan(start_end) else start_end), 0
    for e in ends:
        stalled += e <= prev
        prev = max(prev, e)
    f["stalled_stages"] = float(stalled)  # a stage ending before the one before it ends: no time of its own
    f["unknown_calls"] = float(unknown)
    f["code_lines"] = float(len(lines))
    vals: dict[str, list[float]] = {}
    for name, v in settings_in(text):
        vals.setdefault(name, []).append(v)
    for name in ("temperature", "sigma", "tau", "tau0", "delta", "window"):
        f[name] = float(np.mean(vals[name])) if name in vals else nan
    sym = [float(x) for x in _SYM.findall(text)]
    f["sym"] = float(np.mean(sym)) if sym else nan
    temps = [float(x) for x in _TEMP.findall(text)]
    f["monotone_share"] = float(np.mean([t == 0 for t in temps])) if temps else nan
    f["smooth_start"] = float("smooth_start" in text)
    n0, co, mx = _N0.search(text), _COARSEN.search(text), _MAX_N.search(text)
    f["n0"] = math.log2(int(n0.group(1))) if n0 and int(n0.group(1)) > 0 else nan
    f["coarsen"] = math.log2(int(co.group(1))) if co and int(co.group(1)) > 0 else nan
    f["max_n"] = math.log2(int(mx.group(1))) if mx and int(mx.group(1)) > 0 else nan
    f["start_end"] = start_end
    f["first_end"] = ends[0] if ends else nan
    f["last_end"] = max(ends) if ends else nan
    return f


def feature_table(texts: list[str]) -> tuple[np.ndarray, list[str]]:
    """(X [programs, features], names): `program_features` of each text; a numeric setting missing somewhere is
    filled with its column median (over the texts that have it; 0 if none does) and gets a `<name>_missing`
    indicator column. The start one-hot columns come first (`START_COLS`)."""
    rows = [program_features(t) for t in texts]
    names = list(rows[0]) if rows else [*START_COLS]
    X = np.array([[r[n] for n in names] for r in rows], dtype=float).reshape(len(rows), len(names))
    cols, out_names = [], []
    for j, n in enumerate(names):
        c = X[:, j].copy()
        miss = np.isnan(c)
        if miss.any():
            c[miss] = float(np.median(c[~miss])) if (~miss).any() else 0.0
        cols.append(c)
        out_names.append(n)
        if miss.any() and n in NUMERIC:
            cols.append(miss.astype(float))
            out_names.append(f"{n}_missing")
    return (np.stack(cols, axis=1) if cols else np.zeros((len(rows), 0))), out_names


# ------------------------------------------------------------------------------------------------ metrics

def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n, ties given their mean rank."""
    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="mergesort")
    r = np.empty(len(x))
    r[order] = np.arange(1, len(x) + 1)
    _, inv, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inv, weights=r)
    return (sums / counts)[inv]


def auc(y: np.ndarray, score: np.ndarray) -> float | None:
    """The area under the ROC curve of `score` for the binary `y` (Mann-Whitney, ties counted half); None if `y`
    has one class."""
    y = np.asarray(y).astype(bool)
    pos, neg = int(y.sum()), int((~y).sum())
    if not pos or not neg:
        return None
    r = _ranks(score)
    return float((r[y].sum() - pos * (pos + 1) / 2) / (pos * neg))


def spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    ra, rb = _ranks(a), _ranks(b)
    if len(ra) < 3 or ra.std() == 0 or rb.std() == 0:
        return None
    return float(np.corrcoef(ra, rb)[0, 1])


def r2(y: np.ndarray, pred: np.ndarray) -> float | None:
    y, pred = np.asarray(y, float), np.asarray(pred, float)
    ss = float(((y - y.mean()) ** 2).sum())
    return None if ss == 0 else float(1 - ((y - pred) ** 2).sum() / ss)


def winsorise(y: np.ndarray, lo: float = 2, hi: float = 98) -> np.ndarray:
    a, b = np.percentile(y, [lo, hi])
    return np.clip(y, a, b)


# ------------------------------------------------------------------------------------------------ folds, models

def kfold(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """The fold (0..k-1) of each of n rows, at random, sizes within one."""
    f = np.arange(n) % k
    return f[rng.permutation(n)]


def group_folds(groups: list[str], k: int, rng: np.random.Generator) -> np.ndarray:
    """The fold of each row: whole groups per fold (min(k, groups) folds), groups taken in a random order,
    largest first, each to the fold with the fewest rows so far."""
    names, inv, counts = np.unique(np.asarray(groups), return_inverse=True, return_counts=True)
    k = min(k, len(names))
    order = rng.permutation(len(names))
    order = order[np.argsort(-counts[order], kind="stable")]
    fold_of, size = np.empty(len(names), int), np.zeros(k)
    for g in order:
        j = int(np.argmin(size))
        fold_of[g] = j
        size[j] += counts[g]
    return fold_of[inv]


def _standardise(tr: np.ndarray, te: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mu, sd = tr.mean(axis=0), tr.std(axis=0)
    sd[sd == 0] = 1.0
    return (tr - mu) / sd, (te - mu) / sd


def fit_ridge(X: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    """Weights [intercept, w...] of the ridge regression (intercept not penalised)."""
    A = np.hstack([np.ones((len(X), 1)), X])
    P = lam * np.eye(A.shape[1])
    P[0, 0] = 0.0
    return np.linalg.solve(A.T @ A + P, A.T @ y)


def fit_logistic(X: np.ndarray, y: np.ndarray, lam: float, iters: int = 30) -> np.ndarray:
    """Weights [intercept, w...] of the L2 logistic regression, by Newton (IRLS) steps."""
    A = np.hstack([np.ones((len(X), 1)), X])
    P = lam * np.eye(A.shape[1])
    P[0, 0] = 0.0
    m = float(np.clip(y.mean(), 1e-3, 1 - 1e-3))
    w = np.zeros(A.shape[1])
    w[0] = math.log(m / (1 - m))
    for _ in range(iters):
        p = 1 / (1 + np.exp(-np.clip(A @ w, -30, 30)))
        g = A.T @ (p - y) + P @ w
        H = (A * (p * (1 - p))[:, None]).T @ A + P + 1e-9 * np.eye(A.shape[1])
        step = np.linalg.solve(H, g)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def knn_predict(Xtr: np.ndarray, ytr: np.ndarray, Xte: np.ndarray, k: int) -> np.ndarray:
    """The mean target of each test row's k nearest training rows (Euclidean)."""
    k = max(1, min(k, len(Xtr)))
    d = (Xte ** 2).sum(1)[:, None] - 2 * Xte @ Xtr.T + (Xtr ** 2).sum(1)[None, :]
    idx = np.argpartition(d, k - 1, axis=1)[:, :k]
    return ytr[idx].mean(axis=1)


def cv_predict(X: np.ndarray, y: np.ndarray, folds: np.ndarray, model: str, binary: bool,
               lam: float = 10.0) -> np.ndarray:
    """Out-of-fold predictions of `model` (`linear`: ridge or logistic; `knn`) on standardised features."""
    pred = np.zeros(len(y))
    for f in np.unique(folds):
        te, tr = folds == f, folds != f
        Xtr, Xte = _standardise(X[tr], X[te])
        if model == "knn":
            pred[te] = knn_predict(Xtr, y[tr], Xte, int(np.clip(round(math.sqrt(tr.sum())), 5, 50)))
        elif binary and y[tr].min() == y[tr].max():
            pred[te] = y[tr][0]
        else:
            w = (fit_logistic if binary else fit_ridge)(Xtr, y[tr], lam)
            pred[te] = w[0] + Xte @ w[1:]
    return pred


def oracle_pick(y_raw: np.ndarray, pred: np.ndarray, folds: np.ndarray, top: float = TOP) -> dict:
    """Per held-out fold, the mean raw target of its top `top` share by prediction and the fold's mean; the
    fold-size weighted means and their difference (`gain`)."""
    tops, means, sizes = [], [], []
    for f in np.unique(folds):
        i = np.flatnonzero(folds == f)
        m = max(1, int(math.ceil(top * len(i))))
        tie = np.random.default_rng(int(f)).random(len(i))  # ties broken at random, not by row order
        best = i[np.lexsort((tie, -pred[i]))[:m]]
        tops.append(float(y_raw[best].mean()))
        means.append(float(y_raw[i].mean()))
        sizes.append(len(i))
    w = np.array(sizes) / sum(sizes)
    t, m = float(np.dot(w, tops)), float(np.dot(w, means))
    return {"top_mean": t, "mean": m, "gain": t - m}


def _score(y: np.ndarray, y_raw: np.ndarray, pred: np.ndarray, folds: np.ndarray, binary: bool) -> dict:
    out = {"auc": auc(y, pred)} if binary else {"spearman": spearman(y, pred), "r2": r2(y, pred)}
    out["oracle_gain"] = oracle_pick(y_raw, pred, folds)["gain"]
    return out


def _summary(obs: float | None, draws: list[float | None]) -> dict:
    v = np.array([d for d in draws if d is not None], float)
    if not len(v):
        return {"mean": None, "sd": None, "p": None, "z": None}
    p = None if obs is None else (1 + int((v >= obs - 1e-12).sum())) / (1 + len(v))
    z = None if obs is None or v.std() == 0 else float((obs - v.mean()) / v.std())
    return {"mean": float(v.mean()), "sd": float(v.std()), "p": p, "z": z}


def permute_within(groups: np.ndarray | None, rng: np.random.Generator) -> np.ndarray:
    """A permutation of range(len(groups)) that moves rows only within their group (all rows: one group)."""
    n = len(groups)
    p = np.arange(n)
    for g in np.unique(groups):
        i = np.flatnonzero(groups == g)
        p[i] = rng.permutation(i)
    return p


def evaluate(X: np.ndarray, y: np.ndarray, y_raw: np.ndarray, folds: np.ndarray, binary: bool,
             rng: np.random.Generator, perms: int, strata: np.ndarray | None = None,
             free_cols: np.ndarray | None = None, groups: np.ndarray | None = None) -> dict:
    """Per model: the out-of-fold metrics, `oracle_pick`, the shuffled-label control and (given `strata` and the
    `free_cols` to permute within each stratum) the within-stratum control. With `groups` (the run of each row,
    where the folds are grouped by run) the labels are shuffled within each run, so the control keeps the runs'
    own base rates, which grouped folds see as a shift between folds."""
    groups = np.zeros(len(y), int) if groups is None else np.asarray(groups)
    key = "auc" if binary else "spearman"
    res = {}
    for model in ("linear", "knn"):
        pred = cv_predict(X, y, folds, model, binary)
        r = _score(y, y_raw, pred, folds, binary) | {"oracle_pick": oracle_pick(y_raw, pred, folds)}
        r.pop("oracle_gain")
        if not binary:  # a program's own improvement (its gain where > 0): what a search that keeps the best sees
            r["oracle_pick_positive"] = oracle_pick(np.maximum(y_raw, 0.0), pred, folds)
        sh = []
        for _ in range(perms):
            p = permute_within(groups, rng)
            sh.append(_score(y[p], y_raw[p], cv_predict(X, y[p], folds, model, binary), folds, binary))
        r["shuffled"] = {key: _summary(r[key], [s[key] for s in sh]),
                         "oracle_gain": _summary(r["oracle_pick"]["gain"], [s["oracle_gain"] for s in sh])}
        if strata is not None and free_cols is not None and len(free_cols):
            ws = []
            for _ in range(perms):
                Xp = X.copy()
                for s in np.unique(strata):
                    i = np.flatnonzero(strata == s)
                    Xp[np.ix_(i, free_cols)] = X[np.ix_(rng.permutation(i), free_cols)]
                ws.append(_score(y, y_raw, cv_predict(Xp, y, folds, model, binary), folds, binary))
            r["within_start"] = {key: _summary(r[key], [s[key] for s in ws]),
                                 "oracle_gain": _summary(r["oracle_pick"]["gain"], [s["oracle_gain"] for s in ws])}
        res[model] = r
    return res


def dataset_report(texts: list[str], targets: dict[str, tuple[np.ndarray, bool]], folds_of, rng: np.random.Generator,
                   perms: int, groups: np.ndarray | None = None) -> dict:
    """For each target {name: (values with NaN where it does not apply, binary)}: the base rate or spread, and the
    `start` and `all` feature sets' `evaluate`. `folds_of(mask)` gives the folds of the rows in `mask`; `groups`
    (each row's run, when the folds are grouped by run) keeps the shuffled control's labels within their run."""
    X, names = feature_table(texts)
    starts = np.array([start_of(body_of(t)) for t in texts])
    out: dict = {"programs": len(texts), "features": names, "targets": {}}
    for tname, (vals, binary) in targets.items():
        ok = ~np.isnan(vals)
        y_raw = vals[ok]
        if ok.sum() < 10 or np.unique(y_raw).size < 2:
            out["targets"][tname] = {"n": int(ok.sum()), "skipped": "too few rows or one value"}
            continue
        folds = folds_of(ok)
        if np.unique(folds).size < 2:
            out["targets"][tname] = {"n": int(ok.sum()), "skipped": "fewer than 2 folds (runs)"}
            continue
        y = y_raw if binary else winsorise(y_raw)
        Xo = X[ok]
        t: dict = {"n": int(ok.sum()), "folds": int(np.unique(folds).size)}
        t |= {"rate": float(y_raw.mean())} if binary else {
            "mean": float(y_raw.mean()), "median": float(np.median(y_raw)), "sd": float(y_raw.std())}
        t["by_start"] = {s: {"n": int((starts[ok] == s).sum()), "mean": float(y_raw[starts[ok] == s].mean())}
                         for s in STARTS if (starts[ok] == s).any()}
        ncols = len(START_COLS)
        g = None if groups is None else np.asarray(groups)[ok]
        t["start"] = evaluate(Xo[:, :ncols], y, y_raw, folds, binary, rng, perms, groups=g)
        t["all"] = evaluate(Xo, y, y_raw, folds, binary, rng, perms, strata=starts[ok],
                            free_cols=np.arange(ncols, Xo.shape[1]), groups=g)
        Xs, _ = _standardise(Xo, Xo[:1])
        w = (fit_logistic if binary else fit_ridge)(Xs, y, 10.0)[1:]
        top = np.argsort(-np.abs(w))[:8]
        t["coef"] = {names[j]: round(float(w[j]), 6 if not binary else 3) for j in top}  # all rows, standardised
        out["targets"][tname] = t
    return out


# ------------------------------------------------------------------------------------------------ data

def _rows(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def load_run(run: Path) -> tuple[list[dict], str, int]:
    """(one row per program written for a non-root state: text, run, step, parent, valid, score, parent_score,
    gain; the fingerprint of the run's rows; the count of programs whose text is unknown)."""
    samples = run / "samples.jsonl"
    path = samples if samples.exists() else run / "results.jsonl"
    if not path.exists() or not (run / "tree.json").exists():
        raise FileNotFoundError(f"{run}: no samples.jsonl/results.jsonl or tree.json")
    rows = _rows(path)
    fp = hashlib.sha1(json.dumps([(r.get("program"), r.get("text"), r.get("parent"), r.get("score"), r.get("step"))
                                  for r in rows]).encode()).hexdigest()[:16]
    text_of = text_reader(run, rows, samples.exists())
    nodes = {n["id"]: n for n in json.loads((run / "tree.json").read_text())["nodes"]}
    out, unknown = [], 0
    for r in rows:
        parent = nodes.get(r.get("parent"))
        if parent is None or not parent.get("parent_id"):
            continue
        text = text_of(r)
        if not text:
            unknown += 1
            continue
        ok = bool(r.get("valid", True)) and r.get("score") is not None
        score = float(r["score"]) if ok else None
        out.append({"text": text, "run": run.name, "step": int(r.get("step", 0)), "parent": r.get("parent"),
                    "valid": ok, "score": score, "parent_score": float(parent["score"]),
                    "gain": float(parent["score"]) - score if ok else None})
    return out, fp, unknown


def child_targets(rows: list[dict], with_valid: bool) -> dict[str, tuple[np.ndarray, bool]]:
    nan = float("nan")
    gain = np.array([r["gain"] if r["valid"] else nan for r in rows], float)
    sib = np.full(len(rows), nan)
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(rows):
        if r["valid"]:
            groups.setdefault((r["run"], r["step"], r["parent"]), []).append(i)
    for idx in groups.values():
        if len(idx) >= 2:
            med = float(np.median(gain[idx]))
            sib[idx] = (gain[idx] > med).astype(float)
    t = {"beat_parent": (np.where(np.isnan(gain), nan, (gain > 0).astype(float)), True),
         "gain": (gain, False), "above_siblings": (sib, True)}
    if with_valid:
        t["valid"] = (np.array([float(r["valid"]) for r in rows]), True)
    return t


def valid_by_start(rows: list[dict]) -> dict:
    out = {}
    for s in STARTS:
        v = [r["valid"] for r in rows if start_of(r["text"]) == s]
        if v:
            out[s] = {"programs": len(v), "valid": round(float(np.mean(v)), 3)}
    return out


def pool_report(path: Path, folds: int, rng: np.random.Generator, perms: int) -> dict:
    pool = json.loads(path.read_text())
    progs = [p for p in pool["programs"] if p.get("status") == "ok" and p.get("c5") is not None]
    c5 = np.array([float(p["c5"]) for p in progs])
    med, q25 = float(np.median(c5)), float(np.percentile(c5, 25))
    texts = [p["code"] for p in progs]
    fold = kfold(len(texts), folds, rng)
    res = dataset_report(texts, {"best_quarter": ((c5 <= q25).astype(float), True), "c5_gain": (med - c5, False)},
                         lambda mask: fold[mask], rng, perms)
    res |= {"pool_programs": len(pool["programs"]), "invalid": len(pool["programs"]) - len(progs),
            "c5_median": med, "c5_q25": q25}
    tops = [r for r in pool.get("rescore", []) if r.get("tail") == "top" and r.get("c5") is not None]
    if tops:
        # the pool's best tail (top ~10% by first C5, chosen on that one noisy score) rerun with another seed: how
        # much of their edge is the program and how much its seed, beside the pool's mean and median
        re_c5 = np.array([float(r["c5"]) for r in tops])
        first = np.array([float(r["c5_first"]) for r in tops])
        res["top_tail_rerun"] = {"n": len(tops), "share_of_pool": round(len(tops) / len(progs), 3),
                          "first_mean_gain": float(med - first.mean()), "rescore_mean_gain": float(med - re_c5.mean()),
                          "rescore_gain_over_pool_mean": float(c5.mean() - re_c5.mean()),
                          "rescore_beats_pool_median": float(np.mean(re_c5 < med)),
                          "rescore_in_best_quarter": float(np.mean(re_c5 <= q25))}
    return res


def _headline(res: dict) -> list[str]:
    """A human table: dataset, target, features, model, metric (shuffled mean±sd, p), oracle gain."""
    out = []

    def walk(name, d):
        for tname, t in d.get("targets", {}).items():
            if "skipped" in t:
                out.append(f"{name:14s} {tname:15s} skipped: {t['skipped']}")
                continue
            for fs in ("start", "all"):
                for model, r in t[fs].items():
                    key = "auc" if "auc" in r else "spearman"
                    v, sh = r[key], r["shuffled"][key]
                    ws = r.get("within_start", {}).get(key, {})
                    extra = f" r2={r['r2']:+.3f}" if "r2" in r and r["r2"] is not None else ""
                    wtxt = f" within_start={ws['mean']:.3f}" if ws.get("mean") is not None else ""
                    vtxt = "None" if v is None else f"{v:.3f}"
                    shtxt = "None" if sh["mean"] is None else f"{sh['mean']:.3f}±{sh['sd']:.3f} p={sh['p']:.2f}"
                    out.append(f"{name:14s} {tname:15s} {fs:5s} {model:6s} {key}={vtxt}{extra} shuffled={shtxt}"
                               f"{wtxt} oracle_gain={r['oracle_pick']['gain']:+.3g}")
    if "pool" in res:
        walk("pool", res["pool"])
    for arm, d in res.get("children", {}).items():
        walk(f"children:{arm}", d)
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tags", nargs="+", default=[], help="discover_ttt.py run tags")
    ap.add_argument("--seeds", type=int, nargs="+", default=[])
    ap.add_argument("--arms", nargs="+", default=["trained", "frozen", "random_blocks"])
    ap.add_argument("--root", type=Path, default=Path("runs/discover"), help="the folder of the ttt_* runs")
    ap.add_argument("--pool", type=Path, help="a discover_warm_pool.py pool.json")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--perms", type=int, default=20, help="label permutations of each control")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, help="write the JSON here too")
    args = ap.parse_args(argv)
    if args.folds < 2:
        ap.error("--folds must be at least 2")
    rng = np.random.default_rng(args.seed)
    res: dict = {"benchmark": "discover_signal", "tags": args.tags, "seeds": args.seeds, "arms": args.arms,
                 "folds": args.folds, "perms": args.perms, "seed": args.seed, "top": TOP}
    if args.pool:
        if not args.pool.exists():
            sys.exit(f"discover_signal: error: {args.pool}: no such pool file")
        res["pool"] = pool_report(args.pool, args.folds, rng, args.perms)
    runs: dict = {"loaded": [], "missing": [], "duplicates": {}, "unknown_text": {}}
    by_arm: dict[str, list[dict]] = {}
    seen: dict[str, str] = {}
    for arm in args.arms:
        for tag in args.tags:
            for seed in args.seeds:
                run = args.root / f"ttt_{arm}_{tag}_s{seed}"
                if not run.is_dir():
                    runs["missing"].append(run.name)
                    continue
                try:
                    rows, fp, unknown = load_run(run)
                except FileNotFoundError as e:
                    print(f"discover_signal: warning: {e}; skipped", file=sys.stderr)
                    runs["missing"].append(run.name)
                    continue
                except (ValueError, KeyError, json.JSONDecodeError) as e:
                    sys.exit(f"discover_signal: error: {run}: unreadable run ({e})")
                if fp in seen:
                    runs["duplicates"][run.name] = seen[fp]
                    print(f"discover_signal: warning: {run.name} has the same rows as {seen[fp]}; dropped",
                          file=sys.stderr)
                    continue
                seen[fp] = run.name
                runs["loaded"].append(run.name)
                if unknown:
                    runs["unknown_text"][run.name] = unknown
                by_arm.setdefault(arm, []).extend(rows)
    if runs["missing"]:
        print(f"discover_signal: warning: {len(runs['missing'])} tag/seed/arm combinations have no run folder: "
              f"{' '.join(runs['missing'])}", file=sys.stderr)
    res["runs"] = runs
    if not by_arm and not args.pool:
        sys.exit("discover_signal: error: no run found and no --pool given")
    sets = dict(by_arm)
    if len(by_arm) > 1:
        sets["all"] = [r for rows in by_arm.values() for r in rows]
    # the same program text for the same parent state in two runs (arms that share a seed share their first
    # steps' tree) would put one program on both sides of a split: counted
    res["cross_run_repeats"] = {}
    res["children"] = {}
    for name, rows in sets.items():
        keys: dict[tuple, set] = {}
        for r in rows:
            keys.setdefault((r["text"].strip(), r["parent_score"]), set()).add(r["run"])
        res["cross_run_repeats"][name] = sum(len(v) > 1 for v in keys.values())
        groups = np.array([r["run"] for r in rows])
        with_valid = not all(r["valid"] for r in rows)
        d = dataset_report([r["text"] for r in rows], child_targets(rows, with_valid),
                           lambda mask, g=groups: group_folds(list(g[mask]), args.folds,
                                                              np.random.default_rng(args.seed)), rng, args.perms,
                           groups=groups)
        d["runs"] = int(np.unique(groups).size)
        d["valid_by_start"] = valid_by_start(rows)
        res["children"][name] = d
    for ln in _headline(res):
        print(ln)
    emit_result(res, args.out, indent=None)
    return res


if __name__ == "__main__":
    main()

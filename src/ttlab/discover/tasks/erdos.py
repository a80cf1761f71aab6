"""Erdős minimum overlap (the TTT-Discover seed task).

h is a step function on [0, 2] with n equal pieces, 0 <= h <= 1, rescaled so sum(h) = n/2 (integral 1);
the bound is C5 = max_k (h ⋆ (1-h))_k * 2/n = max(np.correlate(h, 1 - h, "full")) * 2/n, lower is better.
The float verifier follows that recipe exactly; `exact_c5` redoes it in integer (rational) arithmetic for a
claimed record: every float is a dyadic rational, so with h_i = a_i / 2^E, S = sum a_i, b_j = 2S - n a_j,

    C5 = max_k sum_i a_i b_{i+k} / (2 S^2)       (exactly)

Bounds: at most MAX_PIECES pieces (np.correlate is quadratic: ~20 ms at 10,000 pieces); the exact check
computes every correlation sum with ONE big-integer product (Kronecker substitution: the sequences are
packed into two integers whose product's digits are the sums), and `exact_c5_bounded` runs it in a
worker process with a deadline and caches it per construction, so the search pays for it once per new
best and never waits on it unboundedly.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from ttlab.common.data import shared_data_file
from ttlab.discover.tasks.base import Task, VerifyResult, as_float_array, coarsest_steps, invalid

AE_BAR = 0.380924
"""AlphaEvolve (2025) bound, the bar to beat."""
RECORD = 0.380876
"""TTT-Discover (2026) record."""
MAX_PIECES = 10_000
"""Largest h the verifier accepts (the records use 51-600 pieces)."""
EXACT_TIMEOUT_S = 60.0
"""Deadline of one exact check in its worker process."""
BOUND_TOL = 1e-12
"""Float slack allowed on 0 <= h <= 1 after the rescale (the exact check allows none)."""


def c5_value(h: np.ndarray) -> float:
    """C5 of an already rescaled h (sum n/2): max(np.correlate(h, 1-h, 'full')) * 2/n."""
    n = h.shape[0]
    return float(np.max(np.correlate(h, 1.0 - h, mode="full")) * 2.0 / n)


def rescale(h: np.ndarray) -> np.ndarray:
    """Scale h so sum(h) = n/2 (float)."""
    n = h.shape[0]
    return h * (n / 2.0) / np.sum(h)


def exact_c5(h: np.ndarray) -> tuple[Fraction, bool, str]:
    """Exact C5 of the rescaled h as a Fraction, with whether 0 <= rescaled h <= 1 holds exactly.

    Works on the un-rescaled floats (each is a dyadic rational); returns (C5, feasible, message). C5 is
    computed even when infeasible (the message then gives the exact excess over 1).
    """
    fr = [Fraction(float(x)) for x in h]
    if any(x < 0 for x in fr):
        return Fraction(0), False, "h has a negative entry"
    den = max(x.denominator for x in fr)  # a power of two: every other denominator divides it
    a = [x.numerator * (den // x.denominator) for x in fr]
    n, s = len(a), sum(a)
    if s <= 0:
        return Fraction(0), False, "sum(h) is zero"
    # rescaled h_i = n a_i / (2 s) <= 1  <=>  n a_i <= 2 s
    excess = Fraction(max(a) * n - 2 * s, 2 * s)
    feasible = excess <= 0
    b = [2 * s - n * x for x in a]
    best = max(_correlations(a, b))
    msg = "ok" if feasible else f"rescaled h exceeds 1 by {float(excess):.3g} (exact)"
    return Fraction(best, 2 * s * s), feasible, msg


def _pack(xs: list[int], width: int) -> int:
    """sum xs[i] * 2^(8 width i) for non-negative xs, built from bytes (linear time)."""
    return int.from_bytes(b"".join(x.to_bytes(width, "little") for x in xs), "little")


def _correlations(a: list[int], b: list[int]) -> list[int]:
    """v_k = sum_i a_i b_{i+k} for k = -(n-1)..n-1, exactly (a >= 0, b any sign), via one product per sign."""
    n = len(a)
    out = [0] * (2 * n - 1)
    bits = max(x.bit_length() for x in a) + max(abs(x).bit_length() for x in b) + n.bit_length() + 1
    width = (bits + 7) // 8
    pa = _pack(a, width)
    for sign in (1, -1):
        part = [max(sign * x, 0) for x in reversed(b)]  # reversed: correlation becomes a product
        if not any(part):
            continue
        prod = (pa * _pack(part, width)).to_bytes(width * (2 * n), "little")
        for m in range(2 * n - 1):  # coefficient m of the product is v_{n-1-m}
            out[n - 1 - m - (-(n - 1))] += sign * int.from_bytes(prod[m * width:(m + 1) * width], "little")
    return out


_EXACT_CACHE: dict[str, tuple[Fraction | None, bool, str]] = {}


def exact_c5_bounded(h: np.ndarray, timeout_s: float = EXACT_TIMEOUT_S) -> tuple[Fraction | None, bool, str]:
    """`exact_c5` in a worker process killed at `timeout_s` (None, False, reason on timeout); cached per h."""
    h = np.ascontiguousarray(h, dtype=np.float64)
    key = hashlib.sha256(h.tobytes()).hexdigest()
    if key in _EXACT_CACHE:
        return _EXACT_CACHE[key]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    try:
        out = subprocess.run([sys.executable, "-m", "ttlab.discover.tasks.exact_worker"], input=json.dumps(
            [float(x).hex() for x in h]), capture_output=True, text=True, timeout=timeout_s, env=env)
        num, den, ok, msg = json.loads(out.stdout)
        res: tuple[Fraction | None, bool, str] = (Fraction(int(num), int(den)), bool(ok), str(msg))
    except subprocess.TimeoutExpired:
        return None, False, f"exact check did not finish within {timeout_s:g}s"
    except (ValueError, TypeError, OSError) as e:
        return None, False, f"exact check worker failed ({type(e).__name__}: {e})"[:300]
    if len(_EXACT_CACHE) > 256:
        _EXACT_CACHE.clear()
    _EXACT_CACHE[key] = res
    return res


def check_record(h: np.ndarray, claimed: float | str) -> tuple[bool, Fraction, str]:
    """Strict check of a claimed record: the exact C5 of h must be <= the claimed value (exact decimal)."""
    c, ok, msg = exact_c5(np.asarray(h, dtype=np.float64))
    if not ok:
        return False, c, msg
    claim = Fraction(str(claimed))
    return c <= claim, c, f"exact C5 = {float(c):.15f} {'<=' if c <= claim else '>'} claimed {claimed}"


class ErdosTask(Task):
    """Erdős minimum overlap: minimise C5 over step functions h."""

    name = "erdos"
    higher_is_better = False
    best_known = RECORD
    best_known_source = "TTT-Discover (arXiv 2601.16175), 600 pieces; AlphaEvolve 0.380924; Haugland 0.380927"

    def __init__(self, n_init: int = 300) -> None:
        self.n_init = n_init

    def problem_statement(self) -> str:
        return (
            "# Erdős minimum overlap problem\n\n"
            "Find a step function h on [0, 2] with n equal pieces (a numpy array of n floats), 0 <= h <= 1, "
            "that minimises C5 = max(np.correlate(h, 1 - h, mode='full')) * 2 / n after h is rescaled so that "
            "sum(h) = n / 2 (the verifier rescales, then re-checks 0 <= h <= 1). Lower is better. Best known: "
            f"{RECORD} (TTT-Discover, 600 pieces); AlphaEvolve reached {AE_BAR}. Any n up to {MAX_PIECES} is "
            "allowed; smooth-max / LP / local-search optimisers work well.\n\n" + self.program_contract()
        )

    def initial_states(self, rng: np.random.Generator, k: int) -> list[np.ndarray]:
        out = []
        for _ in range(k):
            x = np.linspace(-1.0, 1.0, self.n_init)
            h = 0.5 + 0.35 * np.cos(np.pi * x / 2) * (np.abs(x) < 0.9) + 0.05 * rng.standard_normal(self.n_init)
            out.append(np.clip(h, 0.0, 1.0))
        return out

    def normal_forms(self, construction: np.ndarray) -> list[np.ndarray]:
        """h rescaled as the verifier rescales it (sum n/2: the step function of integral 1 on [0, 2]), on the
        fewest equal pieces that represent the same function (`coarsest_steps`: splitting every piece in k
        changes neither the function nor C5), and its images under the two symmetries of C5: reversal
        h(x) -> h(2 - x) and complement h -> 1 - h (which keeps the sum n/2 and the bounds); each maps the
        correlation sequence of h and 1 - h onto itself reversed, so its maximum is unchanged."""
        g = coarsest_steps(rescale(np.asarray(construction, dtype=np.float64)))
        return [g, g[::-1].copy(), 1.0 - g, (1.0 - g)[::-1].copy()]

    def references(self) -> list[tuple[str, np.ndarray]]:
        """The published constructions in `erdos_reference.json` of the shared data dir, when it is there."""
        path = reference_file()
        return [(c["name"], c["h"]) for c in load_reference(path)] if path is not None else []

    def verify(self, output: Any, reported_score: float | None = None) -> VerifyResult:
        h, why = as_float_array(output, "h")
        if h is None:
            return invalid(why)
        if h.ndim != 1:
            return invalid(f"h must be 1-D, got shape {h.shape}")
        n = h.shape[0]
        if not 2 <= n <= MAX_PIECES:
            return invalid(f"h has {n} pieces (need 2..{MAX_PIECES})", n=n)
        if h.min() < 0.0 or h.max() > 1.0:
            return invalid(f"h outside [0, 1] (min {h.min():.3g}, max {h.max():.3g})", n=n)
        if h.sum() <= 0.0:
            return invalid("sum(h) is zero", n=n)
        g = rescale(h)
        if g.min() < 0.0 or g.max() > 1.0 + BOUND_TOL:
            return invalid(f"rescaled h exceeds 1 (max {g.max():.6g}); mass n/2 does not fit", n=n)
        c5 = c5_value(g)
        # the construction kept is the program's h as returned, not its float rescale: the exact check rescales
        # h in rationals, and re-rescaling rounded floats can push a piece over 1 by an ulp
        res = VerifyResult(True, c5, 1.0 / (1e-8 + c5), {"n": float(n), "c5": c5}, f"C5 = {c5:.9f} (n={n})", h)
        return self.with_reported(res, reported_score)


def reference_file() -> Path | None:
    """`erdos_reference.json` of the shared data folder (`ttlab.common.data`), None when absent."""
    return shared_data_file("erdos_reference.json", required=False)


def load_reference(path: str | Path) -> list[dict]:
    """The published constructions: list of {name, source, c5, h}."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        items = data["constructions"]
        return [{"name": c["name"], "source": c.get("source", ""), "c5": float(c["c5"]),
                 "h": np.asarray(c["h"], dtype=np.float64)} for c in items]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: not an Erdős reference file ({type(e).__name__}: {e})") from e

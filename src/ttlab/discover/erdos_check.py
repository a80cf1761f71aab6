"""Independent exact check of an Erdős minimum-overlap construction: Python standard library only.

    python benchmarks/erdos_check.py FILE [--claim 0.380876] [--name NAME]
    python src/ttlab/discover/erdos_check.py FILE [...]        # the same, with nothing but Python installed

Shares no code with the rest of ttlab (it imports the standard library only, and `ttlab` and `ttlab.discover`
import nothing on their own; a test holds both), so it is a second, separate recomputation of what
`ttlab discover verify FILE` reports. FILE is JSON: a list of numbers, or an object with "h",
"construction" or "h_values", or {"constructions": [{"name", "h"}, ...]} (pick one with --name).

The definition (the one the TTT-Discover and AlphaEvolve verifiers use): h is a step function on [0, 2]
with n equal pieces, 0 <= h <= 1, rescaled so that sum(h) = n/2; C5 = (2/n) max_k sum_i h[i+k] (1 - h[i]).
Every float is an exact dyadic rational, so with H = h * 2^E (integers) and T = sum(H), the rescaled
pieces are n H / (2T) and

    C5 = max_k sum_i H[i+k] (2T - n H[i]) / (2 T^2),      valid iff all H >= 0 and n max(H) <= 2T,

computed in integers. Prints one JSON line (exact C5 as a fraction and a decimal, validity, the claim check).
"""

from __future__ import annotations

import argparse
import json
import sys
from fractions import Fraction


def load(path: str, name: str) -> list[float]:
    """The pieces of the construction in `path` (the one named `name` in a file of several)."""
    with open(path) as f:
        d = json.load(f)
    if isinstance(d, dict) and "constructions" in d:
        items = [c for c in d["constructions"] if not name or c.get("name") == name]
        if not items:
            raise ValueError(f"no construction named {name!r} in {path}")
        d = items[0]
    if isinstance(d, dict):
        for key in ("h", "construction", "h_values"):
            if key in d:
                d = d[key]
                break
        else:
            raise ValueError(f"{path} has none of the keys h, construction, h_values")
    if not isinstance(d, list) or not d or not all(isinstance(x, (int, float)) for x in d):
        raise ValueError(f"{path} does not hold a non-empty list of numbers")
    return [float(x) for x in d]


def exact_c5(h: list[float]) -> tuple[Fraction, bool, str]:
    """(exact C5, valid, message): the bound h gives, in integers; valid iff 0 <= h and max <= 1 after rescaling."""
    fr = [Fraction(x) for x in h]  # exact value of each float
    if any(x < 0 for x in fr):
        return Fraction(0), False, "a piece is negative"
    den = 1
    for x in fr:
        den = max(den, x.denominator)  # every denominator is a power of two: the largest is a common one
    big = [int(x * den) for x in fr]
    n, t = len(big), sum(big)
    if t == 0:
        return Fraction(0), False, "all pieces are zero"
    valid, msg = True, "ok"
    if n * max(big) > 2 * t:  # C5 is still computed; the bound it gives holds only for a valid h
        valid, msg = False, f"a piece exceeds 1 after rescaling to sum n/2, by {float(Fraction(n * max(big) - 2 * t, 2 * t)):.3g}"
    comp = [2 * t - n * b for b in big]  # 2T (1 - h'_i), times 2T
    best = None
    for k in range(-(n - 1), n):  # lag k: sum over i of H[i+k] * comp[i]
        lo, hi = max(0, -k), min(n, n - k)
        s = sum(big[i + k] * comp[i] for i in range(lo, hi))
        if best is None or s > best:
            best = s
    return Fraction(best, 2 * t * t), valid, msg


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="erdos_check", description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--claim", default="", help="a claimed upper bound (decimal) to check exactly")
    ap.add_argument("--name", default="")
    a = ap.parse_args(argv)
    try:
        h = load(a.file, a.name)
    except (ValueError, OSError) as e:  # a missing, unreadable or malformed file: one line, exit 1
        sys.exit(f"erdos_check: {e}")
    c, valid, msg = exact_c5(h)
    out = {"file": a.file, "n": len(h), "valid": valid, "message": msg,
           "c5": float(c), "c5_floor_1e-18": f"0.{c.numerator * 10**18 // c.denominator:018d}",
           "c5_fraction": f"{c.numerator}/{c.denominator}"}
    if a.claim:
        out["claim"] = a.claim
        out["claim_holds"] = bool(valid and c <= Fraction(a.claim))
    print(json.dumps(out))
    sys.exit(0 if valid and out.get("claim_holds", True) else 1)


if __name__ == "__main__":
    main()

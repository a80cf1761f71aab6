"""Worker for `erdos.exact_c5_bounded`: reads h as JSON float.hex strings on stdin, prints
[numerator, denominator, feasible, message] of the exact C5 (run with a deadline by the caller)."""

import json
import sys

import numpy as np

from ttlab.discover.tasks.erdos import exact_c5


def main() -> None:
    h = np.array([float.fromhex(x) for x in json.loads(sys.stdin.read())], dtype=np.float64)
    c, ok, msg = exact_c5(h)
    print(json.dumps([str(c.numerator), str(c.denominator), ok, msg]))


if __name__ == "__main__":
    main()

"""Independent exact check of an Erdős minimum-overlap construction: Python standard library only.

    python benchmarks/erdos_check.py FILE [--claim 0.380876] [--name NAME]

The check is `ttlab.discover.erdos_check` (standard library only, no code shared with the rest of ttlab; it
also runs alone: `python src/ttlab/discover/erdos_check.py FILE`). Prints one JSON line (exact C5 as a fraction
and a decimal, validity, the claim check); exits 1 when the construction is invalid or the claim fails.
"""

from __future__ import annotations

from ttlab.discover.erdos_check import main

if __name__ == "__main__":
    main()

"""Presets of `ttlab discover search` and `ttlab discover polish` (plain functions returning a config).

Besides the tiny `debug` presets, each preset here is a configuration that a quoted result was run with, so
the command that reproduces it names the preset instead of spelling out the library program's settings:

    ttlab discover search --preset erdos_auto      # one pinned smoothed-minimax program for the whole tree
    ttlab discover polish FILE --preset hop  # coarse basin hopping from a given construction

`benchmarks/discover_search.py --preset NAME` and `benchmarks/discover_polish.py --preset NAME` take the same
names. The train presets are in `llm/presets.py`.
"""

from __future__ import annotations

import json
from dataclasses import replace

from ttlab.discover.config import PolishConfig, SearchConfig

# ---- search ------------------------------------------------------------------------------------------

ERDOS_LSE_ONLY = "lse=1,adam=0,local=0,minimax=0,slp=0"
"""Library weights that run the smoothed minimax (`library/erdos_lse.py`) and nothing else."""

LADDER_LSE = {"hop_T": 5e-6, "hop_sym": 0.15, "hop_window": 0.3, "hop_sigma": 0.3, "hop_ftol": 1e-11, "n0": 51,
              "levels": 2, "tau_random": 0.01, "tau_end": 1e-10, "factor": 0.3, "penalty": 1000.0, "maxcor": 30,
              "coarsen": 4}
"""`erdos_lse` settings both random-start presets pin: Metropolis hops at n0 = 51 pieces (T = 5e-6, 15% mirror
averages), two doublings, the tau continuation down to 1e-10, and block averages of 4 for hop mode."""


def search_debug() -> SearchConfig:
    """Seconds: 2 initial states, 2 steps of 2 programs with a 2 s budget. The step count ends it; the
    3-minute limit is only a backstop, so a loaded machine runs the same programs, more slowly."""
    return SearchConfig(time_limit="3m", program_budget_s=2.0, grace_s=5.0, init_states=2, states_per_step=2,
                        samples_per_state=1, max_steps=2)


def erdos_ladder() -> SearchConfig:
    """Erdős from one random start, one program of 30 minutes: the `erdos_lse` ladder (`start: random`) with
    every setting pinned (the proposer would otherwise jitter each number): random starts at 51 pieces,
    Metropolis hops there for 25% of the time, two doublings with monotone hops, refinement to 1632 pieces."""
    pins = {"lse": {"start": "random", "hop_frac": 0.25, **LADDER_LSE, "max_n": 1632}}
    return SearchConfig(task="erdos", time_limit="32m", workers=1, init_states=1, states_per_step=1, samples_per_state=1,
                        program_budget_s=1800.0, program_weights=ERDOS_LSE_ONLY,
                        program_settings=json.dumps(pins))


def erdos_auto() -> SearchConfig:
    """Erdős, one pinned program for the whole tree (`start: auto`, 520 s per program, one state and one
    program per step): from a poor parent (C5 above `auto_above` = 0.3812, a root) the ladder (Metropolis hops
    at n = 51 for 40% of the time, doublings to 204, refinement to 816); from a good one, hop mode (block
    averages to 204 pieces, monotone hops for 60% of the time, doubling back to 816)."""
    pins = {"lse": {"start": "auto", "hop_frac": 0.6, "metro_frac": 0.4, **LADDER_LSE, "max_n": 816,
                    "upsample": 1, "auto_above": 0.3812}}
    return SearchConfig(task="erdos", time_limit="20m", workers=1, init_states=1, states_per_step=1, samples_per_state=1,
                        program_budget_s=520.0, program_weights=ERDOS_LSE_ONLY,
                        program_settings=json.dumps(pins))


def erdos_portfolio() -> SearchConfig:
    """`erdos_auto` from three random starts, each laddered once before PUCT chooses (`roots_first`): a seed's
    outcome is set by the basin its first ladder lands in, so three independent ladders, then hop-refinement
    of the best. For a CPU budget of about 30 minutes (three ~400 CPU s ladders leave ~600 s to refine)."""
    return replace(erdos_auto(), init_states=3, roots_first=True)


def erdos_screen() -> SearchConfig:
    """`erdos_auto` whose first program screens seven chains at 51 pieces and ladders the lowest: the level a
    chain ends on at 51 pieces decides where its ladder ends, so the budget goes to chains (7 x ~200 CPU s,
    Metropolis hops at T = 5e-5), one ladder (~180 s), and what is left (~230 s) to the tree's next programs.
    Self-contained: 30 program-CPU minutes (`cpu_budget`), each program's wall backstop 6x its CPU budget, and a
    4-hour wall limit that never cuts the first program below its 1800 s (a shorter `--time-limit` would).
    The first program stops at 90% of its budget. PUCT then ties the root with its child and re-ladders the root
    (seven ~25-s chains, too short to matter) before hop-refining the best."""
    pins = json.loads(erdos_auto().program_settings)
    pins["lse"].update({"metro_frac": 0.77, "chains": 7, "hop_T": 5e-5})
    return replace(erdos_auto(), time_limit="4h", cpu_budget="30m", program_wall_factor=6.0, program_budget_s=1800.0,
                   program_settings=json.dumps(pins))


SEARCH_PRESETS = {"debug": search_debug, "default": SearchConfig, "erdos_ladder": erdos_ladder,
                  "erdos_auto": erdos_auto, "erdos_portfolio": erdos_portfolio, "erdos_screen": erdos_screen}

# ---- polish ------------------------------------------------------------------------------------------


def polish_debug() -> PolishConfig:
    """Seconds: a 20 s time limit in rounds of 8 s."""
    return PolishConfig(time_limit="20s", round_s=8.0)


def hop() -> PolishConfig:
    """Erdős hop mode: `erdos_lse` block-averages the construction by 4 (600 -> 150 pieces), runs monotone basin
    hopping there for half of a 300 s round, then doubles back up; 5 minutes in all."""
    return PolishConfig(program="lse", settings=json.dumps({"hop_frac": 0.5, "coarsen": 4}), round_s=300.0,
                        time_limit="5m")


def scaled() -> PolishConfig:
    """Erdős, resolution doubled: every piece split in two, then the smoothed minimax on the verifier's rescaled
    objective from tau 1e-7, rounds of 160 s for 8 minutes."""
    return PolishConfig(program="lse", settings=json.dumps({"objective": "scaled", "tau0": 1e-07}), round_s=160.0,
                        time_limit="8m", upsample=2)


def scaled_4800() -> PolishConfig:
    """`scaled` with up to 4800 pieces, rounds of 300 s for 22 minutes."""
    return PolishConfig(program="lse", settings=json.dumps({"objective": "scaled", "tau0": 1e-07, "max_n": 4800}),
                        round_s=300.0, time_limit="22m", upsample=2)


POLISH_PRESETS = {"debug": polish_debug, "default": PolishConfig, "hop": hop, "scaled": scaled,
                  "scaled_4800": scaled_4800}

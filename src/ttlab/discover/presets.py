"""Presets of `ttlab discover search` and `ttlab discover polish` (plain functions returning a config).

The train presets are in `llm/presets.py`.
"""

from __future__ import annotations

from ttlab.discover.config import PolishConfig, SearchConfig

# ---- search ------------------------------------------------------------------------------------------

def search_debug() -> SearchConfig:
    """Seconds: 2 initial states, 2 steps of 2 programs with a 2 s budget."""
    return SearchConfig(budget="20s", program_budget_s=2.0, grace_s=5.0, init_states=2, states_per_step=2,
                        samples_per_state=1, max_steps=2)


SEARCH_PRESETS = {"debug": search_debug, "default": SearchConfig}

# ---- polish ------------------------------------------------------------------------------------------


def polish_debug() -> PolishConfig:
    """Seconds: a 20 s budget in rounds of 8 s."""
    return PolishConfig(budget="20s", round_s=8.0)


POLISH_PRESETS = {"debug": polish_debug, "default": PolishConfig}

"""The demo's LLM stage says what was learned live: nothing when no step's group had differing rewards."""

from __future__ import annotations

from ttlab.discover.demo import learned_live


def _row(arm: str, valid: float, samples: int) -> dict:
    return {"arm": arm, "rollout/valid_rate": valid, "learn/samples": samples}


def test_no_update_is_reported_as_nothing_learned():
    text = learned_live([_row("TTT", 0.0, 0), _row("TTT", 0.0, 0), _row("frozen", 0.5, 0)], 3e-4)
    assert text.startswith("nothing") and "2 TTT steps" in text and "0.00 / 0.00" in text


def test_updates_are_counted():
    text = learned_live([_row("TTT", 0.5, 6), _row("TTT", 0.0, 0), _row("TTT", 0.25, 4)], 3e-4)
    assert text.startswith("2 LoRA update(s)") and "in 3 steps" in text

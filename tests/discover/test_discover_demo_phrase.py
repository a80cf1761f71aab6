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


def test_update_probe_counts_updates_that_favour_the_better_programs_and_the_table_shows_it():
    from ttlab.discover.demo import step_table

    rows = [{**_row("TTT", 0.5, 6), "learn/dlogp_pos": 0.02, "learn/dlogp_neg": -0.01},
            {**_row("TTT", 0.75, 8), "learn/dlogp_pos": -0.03, "learn/dlogp_neg": 0.01},
            _row("TTT", 0.0, 0)]
    text = learned_live(rows, 3e-4)
    assert "1 of 2 made the step's better-than-average programs likelier" in text
    for r in rows:
        r.update({"step": 1, "rollout/reward_mean": 1.0, "rollout/score_best": float("nan"), "tree/best_score": 0.4,
                  "time/step_s": 9.0, "time/generate_s": 5.0, "time/evaluate_s": 1.0, "time/learn_s": 3.0})
    table = step_table(rows)
    assert "+0.020 / -0.010" in table[2] and "-0.030 / +0.010" in table[3] and "| - |" in table[4]


def test_ttt_steps_name_themselves_in_the_heartbeat(tmp_path, monkeypatch):
    """A TTT step takes a minute or two on CPU: the progress line names the arm and step, not the stage's start."""
    import io
    from types import SimpleNamespace

    import ttlab.discover.demo as demo
    from ttlab.common.heartbeat import Heartbeat

    seen = []

    class FakeTrainer:
        def __init__(self, cfg, log):
            self.step_idx = 0

        def step(self):
            seen.append(hb.text)
            self.step_idx += 1
            return {"step": self.step_idx}

        def close(self):
            pass

    monkeypatch.setattr(demo, "Trainer", FakeTrainer)
    cfg = SimpleNamespace(steps=2, frozen=False, root="", run_name="")
    stream = io.StringIO()
    with Heartbeat("discover", 300.0, every=60.0, stream=stream) as hb:
        rows = demo.run_arm(cfg, tmp_path / "discover", "TTT")
    assert [r["step"] for r in rows] == [1, 2]
    assert seen == ["TTT-Discover, TTT arm: step 1 of 2 (generate, verify, learn)",
                    "TTT-Discover, TTT arm: step 2 of 2 (generate, verify, learn)"]
    assert "TTT arm: step 2 of 2" in stream.getvalue()

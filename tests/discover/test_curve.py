from ttlab.discover.curve import best_by, first_below

CURVE = [{"t": 10.0, "cpu_s": 8.0, "best_score": float("inf")},
         {"t": 20.0, "cpu_s": 30.0, "best_score": 0.3810},
         {"t": 35.04, "cpu_s": 61.26, "best_score": 0.38087},
         {"t": 50.0, "cpu_s": 90.0, "best_score": 0.38085}]


def test_first_below_reads_either_clock_and_is_none_when_never_reached():
    assert first_below(CURVE, 0.380876) == 35.0
    assert first_below(CURVE, 0.380876, key="cpu_s") == 61.3
    assert first_below(CURVE, 0.38087) == 35.0  # at the bound counts
    assert first_below(CURVE, 0.3808) is None


def test_best_by_ignores_points_after_the_time_and_unfinished_steps():
    assert best_by(CURVE, 5.0) is None
    assert best_by(CURVE, 10.0) is None  # only an infinite (no valid program yet) point
    assert best_by(CURVE, 40.0) == 0.38087
    assert best_by(CURVE, 1e9) == 0.38085

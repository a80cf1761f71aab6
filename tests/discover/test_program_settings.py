"""Reading a block program's numeric settings (`ttlab.discover.program_settings`) and their spread."""

from __future__ import annotations

import math

import numpy as np

from ttlab.discover.program_settings import settings_in, spread
from ttlab.discover.random_blocks import random_program


def test_settings_are_read_as_written_with_scales_on_log10_and_zero_temperatures_left_out():
    text = ("    h, c, hops = eb.hop(h, clock.until(0.3), rng, temperature=0.0, sym=0.15, sigma=0.214, window=0.026)\n"
            "    h, c = eb.continuation(h, clock.until(0.6), tau0=1.5e-06)\n"
            "    h, c = eb.multistart(40, clock.until(0.2), rng, tau=0.00684, start=eb.random_start)\n"
            "    h, c, hops = eb.hop(h, clock.until(0.7), rng, sigma=s * 2, window=w)\n")
    got = settings_in(text)
    assert [n for n, _ in got] == ["sigma", "window", "tau0", "tau"]
    assert math.isclose(got[0][1], math.log10(0.214)) and got[1][1] == 0.026
    assert math.isclose(got[2][1], math.log10(1.5e-6)) and math.isclose(got[3][1], math.log10(0.00684))
    assert settings_in("") == [] and settings_in(None) == []


def test_the_grammar_spreads_its_settings_and_a_copied_program_does_not():
    rng = np.random.default_rng(0)
    progs = [random_program(rng)[0] for _ in range(200)]
    s = spread(progs)
    assert {"sigma", "window", "temperature"} <= set(s) and s["sigma"]["distinct"] > 0.8
    lo, hi = math.log10(0.05), math.log10(0.6)  # the grammar's log-uniform sigma: std (hi - lo) / sqrt(12)
    assert abs(s["sigma"]["std"] - (hi - lo) / math.sqrt(12)) < 0.04
    one = next(p for p in progs if "sigma=" in p)
    same = spread([one] * 10)
    assert same["sigma"]["std"] == 0.0 and same["sigma"]["distinct"] < 0.2

"""The text form of scenario sources: 'name[:key=value,...]' for crossing and procedural pools."""

import pytest

from ttlab.drive.scenarios.crossing import CrossingSpec
from ttlab.drive.scenarios.pool import ProceduralSpec


def test_procedural_spec_parses_every_kind_of_value():
    spec = ProceduralSpec.parse("procedural:n=7,seed=3,families=merge+roundabout,hidden_goal=yes,exits=2")
    assert (spec.n, spec.seed, spec.families, spec.hidden_goal, spec.exits) == (7, 3, ("merge", "roundabout"), True, 2)
    assert ProceduralSpec.parse("procedural") == ProceduralSpec()


def test_crossing_spec_parses_and_checks_n():
    assert CrossingSpec.parse("crossing:n=5,seed=2") == CrossingSpec(n=5, seed=2)
    with pytest.raises(ValueError, match="n must be >= 1"):
        CrossingSpec.parse("crossing:n=0")


@pytest.mark.parametrize("text, match", [
    ("crossin:n=3", "expected 'crossing"),
    ("crossing:m=3", "bad item 'm=3'; keys: n, seed"),
    ("crossing:n", "bad item 'n'"),
    ("crossing:n=three", "n='three' is not an integer"),
])
def test_crossing_spec_errors_name_the_problem(text, match):
    with pytest.raises(ValueError, match=match):
        CrossingSpec.parse(text)


def test_procedural_spec_errors_name_the_problem():
    with pytest.raises(ValueError, match="expected 'procedural"):
        ProceduralSpec.parse("procedurall")
    with pytest.raises(ValueError, match="agents='x' is not an integer"):
        ProceduralSpec.parse("procedural:agents=x")

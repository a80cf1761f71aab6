"""Scenario sources for the driving simulator: procedural generator, Waymo-format JSON, converted cache.

The contract is `types.py` (`Scenario` per scene in numpy, `ScenarioPool` padded tensors on a device).
"""

from ttlab.drive.scenarios.pool import ProceduralSpec, build_pool, load_pool, load_scenarios
from ttlab.drive.scenarios.procedural import generate, generate_pool_scenarios
from ttlab.drive.scenarios.types import Scenario, ScenarioPool
from ttlab.drive.scenarios.waymo_json import ScenarioFormatError, load_scenario

__all__ = ["ProceduralSpec", "Scenario", "ScenarioFormatError", "ScenarioPool", "build_pool", "generate",
           "generate_pool_scenarios", "load_pool", "load_scenario", "load_scenarios"]

"""Scenario sources: procedural generation speed, JSON parse speed, cache convert + load speed.

Prints ONE JSON line last. Usage: python benchmarks/drive_scenarios.py [--scenes 2000] [--procedural 100]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from ttlab.common.data import shared_data_file
from ttlab.drive.scenarios.cache import convert, load_cache
from ttlab.drive.scenarios.pool import build_pool
from ttlab.drive.scenarios.procedural import generate_pool_scenarios
from ttlab.drive.scenarios.waymo_json import load_scenario, scenario_to_json

CARLA = shared_data_file("carla_town02_womd.json", required=False)  # None when the sample is absent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenes", type=int, default=2000, help="scenes in the converted cache")
    ap.add_argument("--procedural", type=int, default=100, help="procedural scenes to generate")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    t0 = time.perf_counter()
    proc = generate_pool_scenarios(args.procedural, seed=0)
    gen_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    build_pool(proc, "cpu")
    pool_s = time.perf_counter() - t0
    tmp = Path(tempfile.mkdtemp())
    try:
        src = tmp / "json"
        src.mkdir()
        # a folder of JSON scenes: the CARLA town and exported procedural scenes, copied up to --scenes files
        texts = [CARLA.read_text()] if CARLA is not None else []
        texts += [json.dumps(scenario_to_json(s)) for s in proc[:20]]
        for i in range(args.scenes):
            (src / f"scene_{i:05d}.json").write_text(texts[i % len(texts)])
        t0 = time.perf_counter()
        load_scenario(src / "scene_00000.json")
        json_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        index = convert(src, tmp / "cache", workers=args.workers)
        conv_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        scenes = load_cache(tmp / "cache")
        load_s = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in (tmp / "cache").iterdir())
        jsize = sum(p.stat().st_size for p in src.iterdir())
    finally:
        shutil.rmtree(tmp)
    print(json.dumps({
        "procedural_scenes": args.procedural, "procedural_gen_s": round(gen_s, 3),
        "procedural_scenes_per_s": round(args.procedural / gen_s, 1), "build_pool_s": round(pool_s, 3),
        "carla_json_parse_s": round(json_s, 3), "convert_scenes": len(index["scenes"]), "convert_s": round(conv_s, 2),
        "convert_workers": args.workers, "cache_load_s": round(load_s, 3),
        "cache_load_scenes_per_s": round(len(scenes) / load_s, 1), "cache_mb": round(size / 2**20, 1),
        "json_mb": round(jsize / 2**20, 1),
    }))


if __name__ == "__main__":
    main()

"""World-model data figures: PushT generation speed, loader throughput (mp4 vs latents), codec PSNR.

    python benchmarks/wm_data.py [--episodes 20] [--steps 100] [--workers 2] [--codec-steps 600]

Prints progress lines, then ONE JSON line last.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np


def windows_per_s(ds, n: int, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(ds), n)
    ds[int(idx[0])]  # warm caches/imports
    t0 = time.perf_counter()
    for i in idx.tolist():
        ds[i]
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--resolution", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--codec-steps", type=int, default=600)
    ap.add_argument("--windows", type=int, default=300)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    import torch

    from ttlab.worldmodel.codecs.autoencoder import KLAutoencoder
    from ttlab.worldmodel.codecs.train import CodecTrainConfig, train_codec
    from ttlab.worldmodel.data import WindowDataset
    from ttlab.worldmodel.data.dino_wm import DinoWMSource
    from ttlab.worldmodel.data.latents import LatentSource, encode_source
    from ttlab.worldmodel.data.pusht import generate_pusht

    torch.set_num_threads(2)
    out: dict = {"benchmark": "wm_data", "cpu_cores": os.cpu_count(), "torch_threads": torch.get_num_threads()}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        gen = generate_pusht(root / "pusht", args.episodes, args.resolution, args.steps, args.workers, seed=0,
                             show_progress=False)
        print(f"generated {gen['frames']} frames in {gen['seconds']:.1f}s", flush=True)
        out.update({"pusht_gen_frames_per_s": round(gen["frames_per_s"], 1), "pusht_gen_workers": args.workers,
                    "pusht_gen_frames": gen["frames"], "pusht_gen_seconds": round(gen["seconds"], 2),
                    "pusht_mean_block_travel_px": round(gen["mean_block_travel"], 1),
                    "resolution": args.resolution})
        cold = WindowDataset(DinoWMSource(root / "pusht", cache=0), num_frames=8, frame_interval=2, split="train",
                             val_fraction=0.1)
        out["loader_mp4_windows_per_s"] = round(windows_per_s(cold, args.windows), 1)
        src = DinoWMSource(root / "pusht", cache=args.episodes)
        ds_mp4 = WindowDataset(src, num_frames=8, frame_interval=2, split="train", val_fraction=0.1)
        for e in range(len(src)):  # decode every episode once, so the timing below is the cached path
            src.frames(e, np.array([0]))
        out["loader_mp4_cached_windows_per_s"] = round(windows_per_s(ds_mp4, args.windows * 10), 1)
        print(f"mp4 loader: {out['loader_mp4_windows_per_s']} windows/s cold, "
              f"{out['loader_mp4_cached_windows_per_s']} with decoded episodes cached", flush=True)

        cfg = CodecTrainConfig(data=root / "pusht", steps=args.codec_steps, batch_size=32, eval_every=max(
            args.codec_steps // 4, 1), root=root / "runs", run_name="codec", device=args.device)
        res = train_codec(cfg, show_progress=False)
        out.update({"ae_psnr_db": round(res["val_psnr_db"], 2), "ae_train_steps": args.codec_steps,
                    "ae_train_seconds": round(res["seconds"], 1), "ae_batch": 32, "ae_device": args.device,
                    "ae_latent_shape": None})
        print(f"autoencoder: {res['val_psnr_db']:.2f} dB after {res['seconds']:.0f}s", flush=True)
        codec = KLAutoencoder.load(res["checkpoint"])
        idx = encode_source(src, codec, root / "lat", res["checkpoint"], show_progress=False)
        out["ae_latent_shape"] = idx["latent_shape"]
        ds_lat = WindowDataset(LatentSource(root / "lat"), num_frames=8, frame_interval=2, split="train",
                               val_fraction=0.1)
        out["loader_latent_windows_per_s"] = round(windows_per_s(ds_lat, args.windows * 10), 1)
        print(f"latent loader: {out['loader_latent_windows_per_s']} windows/s", flush=True)
    out["loader_window"] = "8 frames x interval 2, single process, random access; cold = every window decodes its mp4"
    print(json.dumps(out))


if __name__ == "__main__":
    main()

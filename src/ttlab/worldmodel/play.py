"""`ttlab wm play`: drive a trained world model live with the keyboard (PushT-style 2-D actions).

Arrow keys (or WASD) set the 2-D action (dx, dy) = `speed` x direction in the dataset's raw action
units; every tick the model predicts the next frame from the last `window - 1` frames with the
sliding-window sampler, and the window shows it. Esc or closing the window quits. `--script` replays a
string of keys (L R U D or . for none), one per frame, through the same pygame event path -- that is
how the headless test drives it (SDL_VIDEODRIVER=dummy).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ttlab.common.config import from_dict, parse_config
from ttlab.common.device import resolve_device
from ttlab.worldmodel.config import TrainConfig
from ttlab.worldmodel.data.windows import ActionStats, to_model_frames, window_actions
from ttlab.worldmodel.diffusion import sample_window
from ttlab.worldmodel.train import open_episodes
from ttlab.worldmodel.visuals import to_uint8, write_mp4
from ttlab.worldmodel.weights import decode, load_world_model, run_codec

KEYMAP = {"L": (-1, 0), "R": (1, 0), "U": (0, -1), "D": (0, 1), ".": (0, 0)}


@dataclass
class PlayConfig:
    """Play a trained NanoWM with the keyboard."""

    checkpoint: Path = Path("runs/wm/latest")
    """A run directory or a weights export stem."""
    episode: int = 0
    """Dataset episode whose first frames start the game."""
    speed: float = 10.0
    """Action magnitude per key press, in raw action units."""
    steps: int = 10
    """Sampling steps per frame."""
    scale: int = 6
    """Window pixels per frame pixel."""
    fps: int = 10
    """Frame rate cap."""
    max_frames: int = 0
    """Quit after this many generated frames (0 = until Esc)."""
    script: str = ""
    """Scripted keys, one per frame (L R U D .); implies max_frames = len(script)."""
    record: Path | None = None
    """Write the played frames to this mp4 (default: none)."""
    device: str = "auto"
    """auto | cpu | cuda."""
    seed: int = 0
    """Sampling seed."""


def _direction(held: set[int], pygame) -> tuple[int, int]:
    dx = (pygame.K_RIGHT in held or pygame.K_d in held) - (pygame.K_LEFT in held or pygame.K_a in held)
    dy = (pygame.K_DOWN in held or pygame.K_s in held) - (pygame.K_UP in held or pygame.K_w in held)
    return int(dx), int(dy)


def play(cfg: PlayConfig) -> dict:
    import pygame  # deferred on purpose: an optional extra that reads SDL_* variables when imported

    bad = sorted(set(cfg.script.upper()) - set(KEYMAP))
    if bad:
        raise ValueError(f"--script {cfg.script!r}: unknown keys {''.join(bad)!r}; one per frame from L R U D .")
    dev = resolve_device(cfg.device)
    wm = load_world_model(cfg.checkpoint, dev)
    tc = from_dict(TrainConfig, wm.train_cfg)
    if wm.action_mean.shape[0] != 2:
        raise ValueError(f"play drives 2-D actions; this model was trained on {wm.action_mean.shape[0]}-D raw actions")
    codec = run_codec(wm.train_cfg, dev)
    stats = ActionStats(wm.action_mean, wm.action_std)
    src = open_episodes(tc)
    if not 0 <= cfg.episode < len(src):
        raise ValueError(f"--episode {cfg.episode}: the dataset has {len(src)} episodes")
    first = to_model_frames(src.frames(cfg.episode, np.array([0])))  # (1, 3, H, W)
    ctx = first[None].to(dev)
    if codec is not None:
        ctx = codec.encode(ctx[0])[None]
    keep = tc.num_frames - 1
    zero = torch.zeros(1, 1, wm.model.cfg.action_dim, device=dev)
    acts = zero.clone()  # per-frame action history (frame 0: zeros)
    g = torch.Generator(device=dev).manual_seed(cfg.seed)
    script = [KEYMAP[c] for c in cfg.script.upper()] if cfg.script else []
    limit = len(script) if script else cfg.max_frames
    keycode = {(-1, 0): pygame.K_LEFT, (1, 0): pygame.K_RIGHT, (0, -1): pygame.K_UP, (0, 1): pygame.K_DOWN}

    pygame.init()
    H, W = first.shape[-2:]
    screen = pygame.display.set_mode((W * cfg.scale, H * cfg.scale))
    pygame.display.set_caption("ttlab wm play: arrows/WASD move, Esc quits")
    clock = pygame.time.Clock()
    held: set[int] = set()
    shown, directions = [], []
    n, running = 0, True
    try:
        while running and (limit == 0 or n < limit):
            if script:  # replay through the real event queue
                for k in list(held):
                    pygame.event.post(pygame.event.Event(pygame.KEYUP, key=k))
                if script[n] != (0, 0):
                    pygame.event.post(pygame.event.Event(pygame.KEYDOWN, key=keycode[script[n]]))
            for ev in pygame.event.get():
                if ev.type == pygame.QUIT or (ev.type == pygame.KEYDOWN and ev.key == pygame.K_ESCAPE):
                    running = False
                elif ev.type == pygame.KEYDOWN:
                    held.add(ev.key)
                elif ev.type == pygame.KEYUP:
                    held.discard(ev.key)
            d = _direction(held, pygame)
            directions.append(d)
            raw = np.tile(np.array(d, np.float32) * cfg.speed, (tc.frame_interval, 1))  # (interval, 2) held key
            a = window_actions(stats.normalize(raw), 0, 2, tc.frame_interval)[1]  # (2 * interval,) as in training
            acts = torch.cat([acts, torch.from_numpy(a).to(dev)[None, None]], dim=1)
            win = sample_window(wm.model, wm.obj, ctx[:, -keep:], acts[:, -(min(keep, ctx.shape[1]) + 1):], 1,
                                cfg.steps, clip=1.0 if codec is None else None, generator=g)
            ctx = torch.cat([ctx, win[:, -1:]], dim=1)[:, -keep:]
            acts = acts[:, -keep:]
            frame = to_uint8(decode(codec, win[:, -1:])[0, 0])  # (H, W, 3)
            shown.append(frame)
            surf = pygame.surfarray.make_surface(np.ascontiguousarray(frame.swapaxes(0, 1)))
            screen.blit(pygame.transform.scale(surf, screen.get_size()), (0, 0))
            pygame.display.flip()
            clock.tick(cfg.fps)
            n += 1
    finally:
        pygame.quit()
    res = {"frames": n, "directions": directions}
    if cfg.record is not None and shown:
        res["video"] = str(write_mp4(cfg.record, np.stack(shown), fps=cfg.fps))
    return res


def main(argv: list[str] | None = None) -> int:
    res = play(parse_config(PlayConfig, argv=argv, prog="ttlab wm play"))
    print(json.dumps({k: v for k, v in res.items() if k != "directions"}))
    return 0

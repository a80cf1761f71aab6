"""Top-down rendering of one env of a DriveEnv: road, vehicles coloured by role, goals, trails.

    rec = Recorder(env, env_index=0)
    for _ in range(steps): env.step(actions); rec.capture()
    write_video(rec.frames, "out.mp4")      # .mp4 through PyAV, .gif through Pillow

Rendering reads device tensors back to the host once per captured frame (a render is not a hot path).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageDraw

from ttlab.drive.scenarios.types import ROAD_TYPE_ID
from ttlab.drive.sim.geometry import box_corners
from ttlab.drive.sim.state import EXPERT, POLICY, STATIC

ROAD_COLOURS = {
    ROAD_TYPE_ID["lane"]: (70, 70, 80), ROAD_TYPE_ID["road_line"]: (200, 200, 120),
    ROAD_TYPE_ID["road_edge"]: (235, 235, 235), ROAD_TYPE_ID["stop_sign"]: (220, 40, 40),
    ROAD_TYPE_ID["crosswalk"]: (150, 150, 210), ROAD_TYPE_ID["speed_bump"]: (230, 140, 40),
    ROAD_TYPE_ID["driveway"]: (110, 90, 70),
}
ROLE_COLOURS = {POLICY: (50, 130, 255), EXPERT: (60, 200, 90), STATIC: (150, 150, 150)}
BACKGROUND = (25, 25, 30)


class Recorder:
    """Captures frames of env `env_index`; trails restart whenever the env's scene or trial changes."""

    def __init__(self, env, env_index: int = 0, size: int = 512, trail: int = 30):
        self.env, self.e, self.size, self.trail = env, env_index, size, trail
        self.frames: list[np.ndarray] = []
        self._key = None
        self._hist: list[np.ndarray] = []

    def _scene_view(self, scene: int):
        n = int(self.env.pool.num_segments[scene])
        seg = self.env.pool.seg[scene, :n].detach().cpu().numpy()
        typ = self.env.pool.seg_type[scene, :n].detach().cpu().numpy()
        pts = seg.reshape(-1, 2)
        lo, hi = pts.min(0) - 5.0, pts.max(0) + 5.0
        scale = (self.size - 1) / float(max(hi - lo))
        return seg, typ, 0.5 * (lo + hi), scale

    def capture(self) -> np.ndarray:
        env, e = self.env, self.e
        st = env.state
        scene = int(env.scene[e])
        trial = int(env.trial[e])
        episode = int(env.episode[e])
        if self._key != (episode, scene, trial):
            self._key = (episode, scene, trial)
            self._view = self._scene_view(scene)
            self._hist = []
        seg, typ, mid, scale = self._view
        half = 0.5 * self.size
        to_px = lambda p: np.stack([half + (p[..., 0] - mid[0]) * scale, half - (p[..., 1] - mid[1]) * scale], -1)  # noqa: E731
        role = st.role[e].cpu().numpy()
        removed = st.removed[e].cpu().numpy()
        xy = torch.stack([st.x[e], st.y[e]], -1).cpu().numpy()
        corners = box_corners(st.x[e], st.y[e], st.heading[e], st.length[e], st.width[e]).cpu().numpy()
        goals = torch.stack([st.goal_x[e], st.goal_y[e]], -1).cpu().numpy()
        shown = env.visible()[e].cpu().numpy() if hasattr(env, "visible") else (role > 0) & ~removed
        self._hist.append(np.where(shown[:, None], xy, np.nan))
        self._hist = self._hist[-self.trail:]

        img = Image.new("RGB", (self.size, self.size), BACKGROUND)
        d = ImageDraw.Draw(img)
        ps = to_px(seg.reshape(-1, 2, 2))
        for (a, b), t in zip(ps, typ, strict=True):
            d.line([tuple(a), tuple(b)], fill=ROAD_COLOURS.get(int(t), (90, 90, 90)), width=2 if t == 3 else 1)
        hist = np.stack(self._hist)  # (H, A, 2)
        for a in np.nonzero(shown)[0]:
            tr = to_px(hist[:, a])
            tr = tr[~np.isnan(tr).any(1)]
            if len(tr) > 1:
                d.line([tuple(p) for p in tr], fill=(120, 120, 160), width=1)
        if env.cfg.hidden_goal:  # candidate exits: hollow grey, the true one (hidden from the policy) green
            cand = env.view.candidates[scene].cpu().numpy()  # (A, M, 2)
            for a in np.nonzero(shown & (role == POLICY))[0]:
                for j, c in enumerate(to_px(cand[a])):
                    true = j == int(env.true_goal[e, a])
                    d.ellipse([c[0] - 5, c[1] - 5, c[0] + 5, c[1] + 5], outline=(90, 220, 90) if true else (160, 160, 160),
                              width=2)
        else:
            for a in np.nonzero(shown & (role == POLICY))[0]:
                g = to_px(goals[a])
                d.ellipse([g[0] - 3, g[1] - 3, g[0] + 3, g[1] + 3], outline=ROLE_COLOURS[POLICY])
        for a in np.nonzero(shown)[0]:
            poly = [tuple(p) for p in to_px(corners[a])]
            d.polygon(poly, fill=ROLE_COLOURS.get(int(role[a]), (200, 200, 200)), outline=(255, 255, 255))
        label = f"{env.pool.names[scene]}  t={int(env.t[e])}"
        if env.trial_mode:
            label = f"Trial {trial + 1} / {env.cfg.k_trials}   " + label
        d.text((6, 6), label, fill=(255, 255, 255))
        flag = st.exit_flag[e].cpu().numpy()
        if (flag != 0).any():  # a report step: the outcome the ego observes now
            right = bool((flag > 0).any())
            d.text((6, 22), "reached the TRUE exit" if right else "reached a WRONG exit",
                   fill=(90, 220, 90) if right else (240, 90, 90))
        frame = np.asarray(img)
        self.frames.append(frame)
        return frame


def write_video(frames: list[np.ndarray], path: str | Path, fps: int = 10) -> Path:
    """Write RGB uint8 frames to .mp4 (PyAV, H.264 or MPEG-4) or .gif (Pillow)."""
    path = Path(path)
    if not frames:
        raise ValueError(f"{path}: no frames to write")
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = path.suffix.lower()
    if suffix == ".gif":
        imgs = [Image.fromarray(f) for f in frames]
        imgs[0].save(path, save_all=True, append_images=imgs[1:], duration=int(1000 / fps), loop=0)
        return path
    if suffix != ".mp4":
        raise ValueError(f"{path}: unsupported video extension {suffix!r} (use .mp4 or .gif)")
    import av  # deferred on purpose: PyAV is an optional dependency, needed only to write .mp4

    h, w = frames[0].shape[:2]
    with av.open(str(path), mode="w") as out:
        try:
            stream = out.add_stream("libx264", rate=fps)
        except Exception:  # a PyAV build without x264 still has the MPEG-4 encoder
            stream = out.add_stream("mpeg4", rate=fps)
        stream.width, stream.height, stream.pix_fmt = w - w % 2, h - h % 2, "yuv420p"
        for f in frames:
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(f[: h - h % 2, : w - w % 2]), format="rgb24")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def rollout_frames(env, steps: int, actions: str = "replay", env_index: int = 0, size: int = 512,
                   seed: int = 0) -> list[np.ndarray]:
    """Reset `env`, step it `steps` times with random actions (or none, for replay-only envs), capture frames."""
    env.reset(seed)
    rec = Recorder(env, env_index, size)
    rec.capture()
    g = torch.Generator(device=env.device).manual_seed(seed)
    shape = (env.num_envs, env.num_agents) + (() if env.cfg.action == "discrete" else (2,))
    for _ in range(steps):
        if env.cfg.action == "discrete":
            act = torch.randint(0, env.num_actions, shape, device=env.device, generator=g)
        else:
            act = torch.rand(shape, device=env.device, generator=g) * 2 - 1
        if actions == "replay":
            act = torch.full(shape[:2], 45, dtype=torch.long, device=env.device)  # nobody is controlled anyway
        env.step(act)
        rec.capture()
    return rec.frames

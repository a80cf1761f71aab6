"""The action path can carry the information: same context, different actions, different futures.

A model that ignores its actions can at best draw the mean of the futures; these tests fail if the
conditioning is broken anywhere between the action tensor and the sampled frame."""

from __future__ import annotations

import numpy as np
import torch

from ttlab.worldmodel.diffusion import DiffusionConfig, Objective, sample_window
from ttlab.worldmodel.model import NanoWM, size_config


def _two_futures(size: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """Two 4-frame clips with the same 2 context frames (a bright 2x2 square at the centre); after them the
    square moves left in clip 0 and right in clip 1, and the actions say so (+-1 on the moving frames)."""
    frames = torch.full((2, 4, 3, size, size), -1.0)
    c = size // 2 - 1
    for b, d in enumerate((-1, 1)):
        for f in range(4):
            x = c + d * max(f - 1, 0) * 2  # still over the context, 2 px per frame after it
            frames[b, f, :, c:c + 2, x:x + 2] = 1.0
    actions = torch.zeros(2, 4, 1)
    actions[0, 2:], actions[1, 2:] = -1.0, 1.0
    return frames, actions


def test_overfit_model_draws_the_future_its_actions_name_and_swapped_actions_swap_it():
    torch.manual_seed(0)
    frames, actions = _two_futures()
    obj = Objective(DiffusionConfig(target="x", timestep_sampling="uniform", clean_context_prob=1.0,
                                    context_frames=2, delta=True, delta_scale=2.0))
    model = NanoWM(size_config("tiny", input_size=8, patch_size=2, action_dim=1, cond_channels=3))
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.0)
    xb, ab = frames.repeat(4, 1, 1, 1, 1), actions.repeat(4, 1, 1)
    for _ in range(250):
        loss, _ = obj.loss(model, xb, ab)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        g = torch.Generator().manual_seed(1)
        true = sample_window(model, obj, frames[:, :2], actions, 2, n_steps=10, generator=g)[:, 2:]
        g = torch.Generator().manual_seed(1)
        swapped = sample_window(model, obj, frames[:, :2], actions.flip(0), 2, n_steps=10, generator=g)[:, 2:]
    err = lambda a, b: (a - b).pow(2).mean().item()  # noqa: E731
    own, other = frames[:, 2:], frames.flip(0)[:, 2:]
    assert err(true, own) < 0.25 * err(true, other)  # drawn where its actions said
    assert err(swapped, other) < 0.25 * err(swapped, own)  # and elsewhere with the other clip's actions


def test_branch_clips_share_their_context_bit_for_bit_and_differ_after_it():
    from ttlab.worldmodel.data.pusht import branch_clips

    d = branch_clips(seed=3, start=10, branches=3, num_frames=4, n_ctx=2, frame_interval=5)
    f, a = d["frames"], d["rel_actions"]
    assert f.shape == (3, 4, 64, 64, 3) and a.shape == (3, 15, 2)
    assert all(np.array_equal(f[b, :2], f[0, :2]) for b in range(3))
    assert all(np.array_equal(a[b, :5], a[0, :5]) for b in range(3))  # actions up to the last context frame
    agents = d["states"][:, -1, :2]  # (3, 2) where each branch's agent ended
    assert min(np.linalg.norm(agents[i] - agents[j]) for i in range(3) for j in range(i)) > 50.0

"""Pixel-aligned actions (`--action-map gaussian`): the blob lands on the pixel the action names, the map path
starts at exactly zero and stays frame-causal, and only data whose actions are image positions may use it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from ttlab.worldmodel.data.dino_wm import PUSHT_WORKSPACE, DinoWMSource
from ttlab.worldmodel.data.pusht import generate_pusht
from ttlab.worldmodel.model import NanoWM
from ttlab.worldmodel.model.action_map import action_points, gaussian_maps, pixel_affine, render_action_maps
from ttlab.worldmodel.model.sizes import nanowm_tiny
from ttlab.worldmodel.presets import debug
from ttlab.worldmodel.train import WorldModelModule, train
from ttlab.worldmodel.weights import load_world_model


@pytest.fixture(scope="module")
def pusht(tmp_path_factory):
    data = tmp_path_factory.mktemp("pusht") / "pusht32"
    generate_pusht(data, num_episodes=3, resolution=32, max_steps=30, workers=1, seed=0, show_progress=False)
    return data


def test_blob_peaks_on_the_pixel_of_its_point():
    pts = torch.tensor([[[[10.0, 20.0], [3.0, 5.0]]]])  # (1, 1, 2, 2): (column, row)
    m = gaussian_maps(pts, 32, sigma=1.5)  # (1, 1, 2, 32, 32)
    assert m.shape == (1, 1, 2, 32, 32)
    assert m[0, 0, 0, 20, 10] == pytest.approx(1.0) and m[0, 0, 1, 5, 3] == pytest.approx(1.0)
    assert divmod(int(m[0, 0, 0].argmax()), 32) == (20, 10)  # (row, column)
    assert m[0, 0, 0, 20, 11] == pytest.approx(np.exp(-0.5 / 1.5**2), rel=1e-5)


def test_affine_inverts_the_normalisation_and_maps_the_workspace_onto_pixel_centres():
    mean, std = np.array([100.0, 300.0]), np.array([40.0, 80.0])
    aff = pixel_affine(512.0, 64, mean, std)
    world = torch.tensor([[4.0, 4.0], [256.0, 508.0]])  # the centres of pixels (0, 0) and (31.5, 63)
    p = action_points(((world - torch.tensor(mean)) / torch.tensor(std)).float().reshape(1, 1, 4), aff)
    np.testing.assert_allclose(p[0, 0].numpy(), [[0.0, 0.0], [31.5, 63.0]], atol=1e-4)


def test_pusht_absolute_actions_are_declared_image_positions_and_land_on_the_agent(pusht, tmp_path):
    assert DinoWMSource(pusht).action_extent is None  # relative actions: the target minus the agent, no position
    assert DinoWMSource(pusht, relative=False).action_extent == PUSHT_WORKSPACE
    data = tmp_path / "pusht64"  # 64 px: at 32 the 2-pixel agent is smeared away by the video codec
    generate_pusht(data, num_episodes=1, resolution=64, max_steps=20, workers=1, seed=0, show_progress=False)
    src = DinoWMSource(data, relative=False)
    st = src.states(0)[::3]  # (n, 5) agent x, y first: the same coordinates as the PD target
    frames = src.frames(0, np.arange(0, src.length(0), 3)).astype(np.float32)  # (n, 64, 64, 3)
    mask = torch.from_numpy(frames[..., 2] - frames[..., 0] > 80).float()  # (n, 64, 64) the blue agent
    g = torch.arange(64).float()
    n = mask.sum((-2, -1))
    assert (n > 0).all()
    centroid = torch.stack([(mask.sum(-2) * g).sum(-1) / n, (mask.sum(-1) * g).sum(-1) / n], -1)  # (n, 2)
    mean, std = np.array([200.0, 250.0]), np.array([90.0, 70.0])
    a = torch.from_numpy((st[:, :2] - mean) / std).float()[None]  # (1, n, 2): the agent as if it were a target
    p = action_points(a, pixel_affine(src.action_extent, 64, mean, std))[0, :, 0]  # (n, 2)
    err = (p - centroid).norm(dim=-1)
    assert err.max() < 1.25 and err.mean() < 0.6  # on the drawn agent (a y-flip or swapped axes: tens of px)


def _pair(**kw):
    cfg = nanowm_tiny(action_dim=6, max_frames=8, **kw)
    torch.manual_seed(0)
    plain = NanoWM(cfg)
    mapped = NanoWM(replace(cfg, action_map="gaussian", action_map_sigma=1.0, action_pixels=(4.0, 8.0, 4.0, 8.0)))
    missing, unexpected = mapped.load_state_dict(plain.state_dict(), strict=False)
    assert set(missing) == {"map_patch.weight", "map_patch.bias"} and not unexpected
    return plain, mapped


def test_map_path_is_zero_at_init_yet_learns_and_frame_zero_gets_no_map():
    plain, mapped = _pair()
    plain.final.weight.data.normal_(0, 0.02)  # a non-zero output, so the equality below is not 0 == 0
    mapped.final.weight.data.copy_(plain.final.weight.data)
    assert mapped.cfg.map_channels == 3
    x, t, a = torch.randn(2, 4, 3, 16, 16), torch.rand(2, 4) * 1000, torch.randn(2, 4, 6)
    torch.testing.assert_close(mapped(x, t, a), plain(x, t, a))  # the map adds nothing at init
    mapped(x, t, a).square().sum().backward()
    assert mapped.map_patch.weight.grad.abs().sum() > 0  # but it gets a gradient
    maps = render_action_maps(a, mapped.cfg.action_pixels, 16, 1.0)  # (2, 4, 3, 16, 16)
    assert maps.shape == (2, 4, 3, 16, 16) and maps[:, 0].abs().sum() == 0 and maps[:, 1:].amax() > 0.5


def test_drawn_actions_change_the_frames_they_lead_to_and_never_earlier_ones():
    _, mapped = _pair()
    torch.manual_seed(2)
    mapped.map_patch.weight.data.normal_(0, 0.1)
    mapped.final.weight.data.normal_(0, 0.02)
    for blk in mapped.blocks:  # open the gates so information flows through the blocks
        blk.ada.bias.data.normal_(0, 0.1)
    mapped.a_embed.fc2.weight.data.zero_()  # only the map carries the action here
    x, t, a = torch.randn(1, 4, 3, 16, 16), torch.rand(1, 4) * 1000, torch.randn(1, 4, 6)
    b = a.clone()
    b[:, 2] += 1.0  # move frame 2's targets by a few pixels
    with torch.no_grad():
        ya, yb = mapped(x, t, a), mapped(x, t, b)
    torch.testing.assert_close(ya[:, :2], yb[:, :2])  # frames before 2: untouched (frame-causal)
    assert (ya[:, 2:] - yb[:, 2:]).abs().amax() > 1e-4  # frame 2 on: they see where the agent is pulled


def test_action_map_refuses_actions_that_are_not_image_positions(pusht, tmp_path):
    with pytest.raises(ValueError, match="--action-map gaussian: the actions of --data toy are not"):
        train(replace(debug(), action_map="gaussian", root=str(tmp_path), run_name="toy"))
    with pytest.raises(ValueError, match="--no-relative-actions"):
        train(replace(debug(), data=str(pusht), num_frames=3, frame_interval=2, action_map="gaussian",
                      root=str(tmp_path), run_name="rel"))
    with pytest.raises(ValueError, match="action_map 'blob'"):
        nanowm_tiny(action_dim=4, action_map="blob")
    with pytest.raises(ValueError, match="not even"):
        nanowm_tiny(action_dim=3, action_map="gaussian")


def test_training_with_the_map_on_absolute_pusht_actions_exports_it(pusht, tmp_path):
    cfg = replace(debug(), data=str(pusht), num_frames=3, frame_interval=2, val_fraction=0.34, max_steps=2,
                  relative_actions=False, action_map="gaussian", action_map_sigma=1.0, root=str(tmp_path),
                  run_name="map")
    out = train(cfg)
    assert out["steps"] == 2
    wm = load_world_model(out["run_dir"])
    c = wm.model.cfg
    assert (c.action_map, c.action_map_sigma, c.map_channels) == ("gaussian", 1.0, 2)  # 2 raw targets per frame
    expect = pixel_affine(PUSHT_WORKSPACE, 32, wm.action_mean, wm.action_std)
    np.testing.assert_allclose(c.action_pixels, expect, rtol=1e-6)
    assert wm.model.map_patch.weight.abs().sum() > 0  # it trained


def test_compile_keeps_the_modules_parameters_and_checkpoint_keys():
    from ttlab.worldmodel.model import NanoWMConfig

    mcfg = NanoWMConfig(**{**nanowm_tiny(action_dim=2).__dict__})
    eager = WorldModelModule(debug(), mcfg)
    compiled = WorldModelModule(replace(debug(), compile=True), mcfg)
    assert compiled.compiled is not None and eager.compiled is None
    assert list(compiled.state_dict()) == list(eager.state_dict())  # exports and resumes see the plain module


@pytest.mark.slow
def test_compiled_training_matches_eager_training(tmp_path):
    runs = {}
    for name, comp in (("eager", False), ("compiled", True)):
        out = train(replace(debug(), max_steps=3, compile=comp, root=str(tmp_path), run_name=name, log_every=1))
        runs[name] = [loss for _, loss in out["loss_curve"]]
    np.testing.assert_allclose(runs["compiled"], runs["eager"], rtol=2e-2)

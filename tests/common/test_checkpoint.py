"""Contract: checkpoints round-trip nested state exactly, resume continues training identically,
and a crash in the middle of a write leaves the previous checkpoint intact."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import time

import pytest
import torch

from ttlab.common.checkpoint import (
    CheckpointError,
    atomic_write_bytes,
    latest_checkpoint,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)


def _model_and_opt(seed=0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, betas=(0.9, 0.95))
    return model, opt


def _train(model, opt, steps, gen):
    losses = []
    for _ in range(steps):
        x = torch.randn(16, 4, generator=gen)
        loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_nested_state_round_trip(tmp_path):
    state = {
        "step": 7,
        "model": {"w": torch.arange(6.0).reshape(2, 3), "b": torch.zeros(3, dtype=torch.bfloat16)},
        "opt": {"state": {0: {"exp_avg": torch.ones(2)}, 1: {"step": torch.tensor(3.0)}}, "groups": [{"lr": 0.1}]},
        "tuple": (1, "a", torch.tensor([1, 2])),
        "none": None,
    }
    save_checkpoint(tmp_path / "ck", state)
    back = load_checkpoint(tmp_path / "ck")
    assert back["step"] == 7 and back["none"] is None
    assert torch.equal(back["model"]["w"], state["model"]["w"])
    assert back["model"]["b"].dtype == torch.bfloat16
    assert set(back["opt"]["state"]) == {0, 1}
    assert isinstance(back["tuple"], tuple) and torch.equal(back["tuple"][2], torch.tensor([1, 2]))


def test_resume_continues_exactly(tmp_path):
    model, opt = _model_and_opt()
    gen = torch.Generator().manual_seed(1)
    _train(model, opt, 5, gen)
    save_checkpoint(tmp_path / "latest", {"model": model.state_dict(), "opt": opt.state_dict(),
                                          "gen": gen.get_state(), "rng": rng_state()})
    straight = _train(model, opt, 5, gen)

    model2, opt2 = _model_and_opt(seed=123)  # different init: everything must come from the checkpoint
    ck = load_checkpoint(latest_checkpoint(tmp_path))
    model2.load_state_dict(ck["model"])
    opt2.load_state_dict(ck["opt"])
    gen2 = torch.Generator()
    gen2.set_state(ck["gen"])
    set_rng_state(ck["rng"])
    resumed = _train(model2, opt2, 5, gen2)
    assert resumed == straight


def test_rng_state_round_trip(tmp_path):
    import random

    import numpy as np

    save_checkpoint(tmp_path / "r", {"rng": rng_state()})
    a = (random.random(), np.random.rand(), torch.rand(1).item())
    set_rng_state(load_checkpoint(tmp_path / "r")["rng"])
    b = (random.random(), np.random.rand(), torch.rand(1).item())
    assert a == b


def _slow_writer(path, ready):
    """Writes a huge payload through atomic_write_bytes; killed mid-write by the test."""
    ready.set()
    atomic_write_bytes(path, b"x" * (400 * 1024 * 1024))


def test_atomic_write_survives_crash_mid_write(tmp_path):
    target = tmp_path / "state.json"
    atomic_write_bytes(target, json.dumps({"step": 1}).encode())
    ctx = mp.get_context("fork")
    ready = ctx.Event()
    p = ctx.Process(target=_slow_writer, args=(target, ready))
    p.start()
    ready.wait(10)
    time.sleep(0.05)
    os.kill(p.pid, signal.SIGKILL)
    p.join()
    assert json.loads(target.read_text()) == {"step": 1}


def test_torn_checkpoint_is_detected(tmp_path):
    save_checkpoint(tmp_path / "ck", {"w": torch.ones(100)})
    st = tmp_path / "ck.safetensors"
    st.write_bytes(st.read_bytes()[:-10])
    with pytest.raises(CheckpointError, match="ck.safetensors"):
        load_checkpoint(tmp_path / "ck")
    with pytest.raises(CheckpointError, match="missing.json"):
        load_checkpoint(tmp_path / "missing")
    assert latest_checkpoint(tmp_path / "nothing") is None


def test_same_size_tensors_from_another_save_are_refused(tmp_path):
    """A crash between the tensor rename and the metadata rename pairs new tensors with old metadata;
    the sizes match (same shapes), so only the recorded hash can tell."""
    save_checkpoint(tmp_path / "ck", {"w": torch.ones(100)})
    old_meta = (tmp_path / "ck.json").read_text()
    save_checkpoint(tmp_path / "ck", {"w": torch.zeros(100)})
    (tmp_path / "ck.json").write_text(old_meta)
    with pytest.raises(CheckpointError, match="SHA-256"):
        load_checkpoint(tmp_path / "ck")


@pytest.mark.parametrize("meta", [b"\xff\xfe garbage \x80", b"[1, 2]", b'{"format": "ttlab-ckpt-1"}'],
                         ids=["not-utf8", "not-an-object", "no-size-no-state"])
def test_garbage_metadata_is_refused_by_name(tmp_path, meta):
    save_checkpoint(tmp_path / "ck", {"w": torch.ones(4)})
    (tmp_path / "ck.json").write_bytes(meta)
    with pytest.raises(CheckpointError, match=r"ck\.json: (corrupt JSON|not a ttlab checkpoint|.*lacks)"):
        load_checkpoint(tmp_path / "ck")

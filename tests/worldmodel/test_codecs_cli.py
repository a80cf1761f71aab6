"""`ttlab wm train-codec` and `ttlab wm encode` smoke runs on a tiny DINO-WM PushT-layout dataset."""

import json

import torch
from test_data_dino_wm import write_pusht

from ttlab.worldmodel.cli import main
from ttlab.worldmodel.data.latents import LatentSource


def test_train_codec_then_encode(tmp_path, capsys):
    write_pusht(tmp_path / "d", lens=[8, 9, 10])
    rc = main(["train-codec", "--preset", "debug", "--data", str(tmp_path / "d"), "--root", str(tmp_path / "runs"),
               "--run-name", "t", "--device", "cpu"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (tmp_path / "runs/wm/t/codec.safetensors").exists() and out["scale"] > 0
    assert list((tmp_path / "runs/wm/t/tb").iterdir())
    rc = main(["encode", "--data", str(tmp_path / "d"), "--out", str(tmp_path / "lat"), "--codec", out["checkpoint"],
               "--device", "cpu"])
    assert rc == 0
    lat = LatentSource(tmp_path / "lat")
    assert len(lat) == 3 and lat.frames(0, [0, 1]).shape == (2, 4, 4, 4)
    assert main(["train-codec", "--help"]) == 0 and main(["encode", "--help"]) == 0
    assert main(["data", "info", "--path", str(tmp_path / "nope")]) == 2


def test_train_codec_resume_continues_exactly(tmp_path, capsys, monkeypatch):
    """4 steps in one go == a run interrupted after its step-2 checkpoint, then --resume
    (model, optimizer, schedule, batch order, RNG)."""
    from ttlab.common.checkpoint import load_checkpoint
    from ttlab.worldmodel.codecs.autoencoder import KLAutoencoder

    write_pusht(tmp_path / "d", lens=[8, 9, 10])
    base = ["train-codec", "--preset", "debug", "--data", str(tmp_path / "d"), "--root", str(tmp_path / "runs"),
            "--device", "cpu", "--checkpoint-every", "2", "--steps", "4"]
    assert main(base + ["--run-name", "full"]) == 0

    real_loss, calls = KLAutoencoder.loss, []

    def crashing_loss(self, *a, **k):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt("simulated crash in step 3")
        return real_loss(self, *a, **k)

    monkeypatch.setattr(KLAutoencoder, "loss", crashing_loss)
    assert main(base + ["--run-name", "cut"]) == 130  # the CLI reports an interrupt as exit 130
    monkeypatch.setattr(KLAutoencoder, "loss", real_loss)
    assert load_checkpoint(tmp_path / "runs/wm/cut/checkpoints/latest")["step"] == 2
    assert main(base + ["--run-name", "cut", "--resume"]) == 0
    a = load_checkpoint(tmp_path / "runs/wm/full/checkpoints/latest")
    b = load_checkpoint(tmp_path / "runs/wm/cut/checkpoints/latest")
    assert a["step"] == b["step"] == 4
    for k, v in a["model"].items():
        assert torch.equal(v, b["model"][k]), k
    capsys.readouterr()
    assert main(base + ["--resume"]) == 2  # --resume without --run-name: a one-line user error
    assert "--run-name" in capsys.readouterr().err

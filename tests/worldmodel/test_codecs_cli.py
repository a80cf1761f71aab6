"""`ttlab wm train-codec` and `ttlab wm encode` smoke runs on a tiny DINO-WM PushT-layout dataset."""

import json

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
    assert main(["data", "info", "--path", str(tmp_path / "nope")]) == 1

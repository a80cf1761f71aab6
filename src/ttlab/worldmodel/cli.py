"""`ttlab wm ...` command tree. Each command parses its own dataclass config."""

from __future__ import annotations

from ttlab.common.cli import dispatch
from ttlab.worldmodel import evaluate, play, rollouts, train
from ttlab.worldmodel.codecs import train as codec_train
from ttlab.worldmodel.data import commands as data_commands
from ttlab.worldmodel.data import encode

COMMANDS: dict = {
    # name: (handler(argv) -> int, one-line help)
    "data": (data_commands.data_main,
             "make or inspect data: `data pusht --out DIR --episodes N [--pusher smooth|scripted]`, `data info --path DIR`"),
    "train-codec": (codec_train.main, "train the in-project KL autoencoder on a dataset"),
    "encode": (encode.main, "precompute codec latents of a dataset to disk"),
    "train": (train.main, "train NanoWM (Lightning): `train --preset debug|tiny_pusht|pusht_cpu|pusht_b4|abl_pred_x|...`"),
    "eval": (evaluate.main, "PSNR/SSIM (+LPIPS/FID/FVD with local weights) vs copy-last-frame; JSON + mp4"),
    "rollout": (rollouts.rollout_main, "long-horizon rollout from a start clip and an action file; writes an mp4"),
    "play": (play.main, "drive a trained model live with the keyboard (arrow keys = 2-D action)"),
}


def main(argv: list[str] | None = None) -> int:
    return dispatch("ttlab wm", COMMANDS, argv)

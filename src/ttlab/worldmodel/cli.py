"""`ttlab wm ...` command tree. Each command parses its own dataclass config."""

from __future__ import annotations

from ttlab.common.cli import dispatch

COMMANDS: dict = {
    # name: (handler(argv) -> int, one-line help); commands are added as they are built.
    "data": (lambda argv: __import__("ttlab.worldmodel.data.commands", fromlist=["x"]).data_main(argv),
             "make or inspect data: `data pusht --out DIR --episodes N`, `data info --path DIR`"),
    "train-codec": (lambda argv: __import__("ttlab.worldmodel.codecs.train", fromlist=["x"]).main(argv),
                    "train the in-project KL autoencoder on a dataset"),
    "encode": (lambda argv: __import__("ttlab.worldmodel.data.encode", fromlist=["x"]).main(argv),
               "precompute codec latents of a dataset to disk"),
    "train": (lambda argv: __import__("ttlab.worldmodel.train", fromlist=["x"]).main(argv),
              "train NanoWM (Lightning): `train --preset debug|tiny_pusht|pusht_b4|abl_pred_x|...`"),
    "eval": (lambda argv: __import__("ttlab.worldmodel.evaluate", fromlist=["x"]).main(argv),
             "PSNR/SSIM (+LPIPS/FID/FVD with local weights) vs copy-last-frame; JSON + mp4"),
    "rollout": (lambda argv: __import__("ttlab.worldmodel.rollouts", fromlist=["x"]).rollout_main(argv),
                "long-horizon rollout from a start clip and an action file; writes an mp4"),
    "play": (lambda argv: __import__("ttlab.worldmodel.play", fromlist=["x"]).main(argv),
             "drive a trained model live with the keyboard (arrow keys = 2-D action)"),
}


def main(argv: list[str] | None = None) -> int:
    return dispatch("ttlab wm", COMMANDS, argv)

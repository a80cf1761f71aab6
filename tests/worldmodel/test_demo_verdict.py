"""The wm demo says plainly what its model beats: a verdict needs PSNR and SSIM both, and the table shows every
cheap predictor."""

from __future__ import annotations

from ttlab.worldmodel.demo import PREDICTORS, score_table, verdict


def _res(model: tuple[float, float], rival: tuple[float, float]) -> dict:
    return {"model/psnr": model[0], "model/ssim": model[1], "mean_frame/psnr": rival[0], "mean_frame/ssim": rival[1]}


def test_verdict_needs_both_scores():
    assert verdict(_res((27.0, 0.9), (26.9, 0.8)), "mean_frame") == "beats"
    assert verdict(_res((26.8, 0.7), (26.9, 0.8)), "mean_frame") == "does not beat"
    assert verdict(_res((27.0, 0.7), (26.9, 0.8)), "mean_frame") == "beats in PSNR only"
    assert verdict(_res((26.0, 0.9), (26.9, 0.8)), "mean_frame") == "beats in SSIM only"


def test_score_table_has_every_predictor():
    res = {f"{k}/{s}": 1.0 for k, _ in PREDICTORS for s in ("psnr", "ssim", "tee_ink_ratio")}
    lines = score_table(res, res)
    assert len(lines) == 2 + len(PREDICTORS)
    assert all(name in "\n".join(lines) for _, name in PREDICTORS)


def test_score_table_adds_st_lpips_when_it_was_scored():
    res = {f"{k}/{s}": 1.0 for k, _ in PREDICTORS for s in ("psnr", "ssim", "tee_ink_ratio", "stlpips")}
    lines = score_table(res, res)
    assert "ST-LPIPS" in lines[0] and all(line.count("|") == lines[0].count("|") for line in lines)

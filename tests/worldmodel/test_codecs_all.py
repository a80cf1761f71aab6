"""Codecs behind one interface: pixel identity, in-project KL autoencoder, diffusers AutoencoderKL dir."""

import numpy as np
import pytest
import torch

from ttlab.worldmodel.codecs import PixelCodec, load_codec
from ttlab.worldmodel.codecs.autoencoder import AEConfig, KLAutoencoder, kl_divergence, psnr
from ttlab.worldmodel.data import Episode, ListSource, WindowDataset
from ttlab.worldmodel.data.latents import LatentSource, encode_source


def test_pixel_is_identity():
    x = torch.rand(2, 3, 8, 8) * 2 - 1
    c = load_codec("pixel")
    assert isinstance(c, PixelCodec) and c.scale == 1.0
    assert torch.equal(c.decode(c.encode(x)), x)


def test_kl_and_psnr_golden():
    assert torch.allclose(kl_divergence(torch.zeros(1, 4), torch.zeros(1, 4)), torch.zeros(1))
    assert torch.allclose(kl_divergence(torch.ones(1, 2), torch.zeros(1, 2)), torch.tensor([1.0]))
    x = torch.zeros(1, 3, 2, 2)
    assert torch.allclose(psnr(x + 0.2, x), torch.tensor(10 * np.log10(4 / 0.04)).float())


def test_autoencoder_shapes_save_load_roundtrip(tmp_path):
    m = KLAutoencoder(AEConfig(latent_channels=3, widths=(8, 16)), scale=0.5).eval()
    x = torch.rand(2, 3, 16, 16) * 2 - 1
    z = m.encode(x)
    assert z.shape == (2, 3, 4, 4) and m.latent_shape(16, 16) == (3, 4, 4)
    m.save(tmp_path / "codec")
    m2 = load_codec(tmp_path / "codec.json")
    assert isinstance(m2, KLAutoencoder) and m2.scale == 0.5
    torch.testing.assert_close(m2.decode(m2.encode(x)), m.decode(z))


def test_autoencoder_learns_a_few_steps():
    torch.manual_seed(0)
    m = KLAutoencoder(AEConfig(latent_channels=4, widths=(8, 16)))
    x = torch.zeros(8, 3, 16, 16)
    x[:, :, 4:12, 4:12] = 1.0
    opt = torch.optim.Adam(m.parameters(), 3e-3)
    first = m.loss(x)[0].item()
    for _ in range(30):
        loss = m.loss(x)[0]
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.5 * first


def test_diffusers_autoencoderkl_from_local_dir(tmp_path):
    diffusers = pytest.importorskip("diffusers")
    torch.manual_seed(0)
    vae = diffusers.AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
                                  up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(8, 16),
                                  latent_channels=4, norm_num_groups=4, sample_size=16)
    vae.save_pretrained(tmp_path / "vae")
    assert (tmp_path / "vae" / "diffusion_pytorch_model.safetensors").exists()
    c = load_codec(tmp_path / "vae")
    x = torch.rand(1, 3, 16, 16) * 2 - 1
    with torch.no_grad():
        z = c.encode(x)
        ref = vae.encode(x).latent_dist.mean * c.scale
        y = c.decode(z)
    assert z.shape == (1, 4, 8, 8) and y.shape == (1, 3, 16, 16)
    torch.testing.assert_close(z, ref)
    assert c.scale == pytest.approx(0.18215)


def test_encode_latents_then_windows_read_them(tmp_path):
    eps = [Episode(np.random.default_rng(i).integers(0, 255, (7, 16, 16, 3), dtype=np.uint8),
                   np.random.default_rng(i).normal(size=(7, 2)).astype(np.float32)) for i in range(3)]
    src = ListSource(eps)
    codec = KLAutoencoder(AEConfig(latent_channels=4, widths=(8,)), scale=2.0).eval()
    encode_source(src, codec, tmp_path / "lat", "test", batch_size=4, dtype="float32", show_progress=False)
    lat = LatentSource(tmp_path / "lat")
    assert lat.is_latent and len(lat) == 3 and lat.length(2) == 7
    ds = WindowDataset(lat, 3, 2, split="all")
    item = ds[0]
    with torch.no_grad():
        ref = codec.encode(torch.from_numpy(eps[0].frames[[0, 2, 4]]).permute(0, 3, 1, 2).float() / 127.5 - 1)
    assert item["frames"].shape == (3, 4, 8, 8)
    torch.testing.assert_close(item["frames"], ref, atol=1e-5, rtol=1e-5)
    on_the_fly = WindowDataset(src, 3, 2, split="all", codec=codec)[0]
    torch.testing.assert_close(on_the_fly["frames"], item["frames"], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(on_the_fly["actions"], item["actions"])

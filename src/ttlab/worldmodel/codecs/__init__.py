"""Latent codecs behind one interface: pixel identity, in-project KL autoencoder, diffusers AutoencoderKL."""

from ttlab.worldmodel.codecs.base import Codec, PixelCodec
from ttlab.worldmodel.codecs.load import load_codec

__all__ = ["Codec", "PixelCodec", "load_codec"]

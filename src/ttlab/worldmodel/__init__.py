"""Nano World Model: action-conditioned space/time factorised video diffusion transformer."""

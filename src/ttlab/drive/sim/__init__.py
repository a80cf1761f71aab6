"""Batched multi-agent driving simulator in PyTorch: state over (envs, agents), no per-agent Python loops."""

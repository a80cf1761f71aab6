"""Adaptive driving: batched multi-agent driving simulator, multi-trial episodes, PPO."""

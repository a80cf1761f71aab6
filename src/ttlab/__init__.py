"""ttlab: agents that learn at test time.

Three systems share only `ttlab.common`:
  ttlab.drive       batched multi-agent driving sim, multi-trial episodes, PPO with a KV-cache transformer
  ttlab.discover    TTT-Discover: LLM-written programs, PUCT search, entropic GRPO, hard sandbox
  ttlab.worldmodel  Nano World Model: action-conditioned space/time video DiT
"""

__version__ = "0.1.0"

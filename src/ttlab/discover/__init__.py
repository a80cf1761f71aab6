"""TTT-Discover: LLM-written programs for math constructions, PUCT search, entropic GRPO, sandbox."""

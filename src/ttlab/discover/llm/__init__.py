"""The TTT part of TTT-Discover on real LLM libraries: HF/PEFT policy, vLLM generation, IS-PG loss, trainer."""

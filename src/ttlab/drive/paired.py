"""Paired per-trial outcomes: trial k against trial 0 of the same episode, as `ttlab drive eval` reports them."""

from __future__ import annotations

import inspect
import math

import torch


class PairedTrials:
    """Records per-agent trial outcomes for the first `episodes` episodes of every env.

    Wraps the env's trial metrics object (`env.trial_metrics`): every call of its `add` is forwarded and the
    arguments read by name: `ended`, `trial_idx` (E,), `egos` (E, A) bool and every other (E, A) argument as a
    per-agent outcome (goal, collision, offroad, ...). Outcomes land in (E, episodes, K, A) tensors."""

    def __init__(self, inner, num_envs: int, num_agents: int, k_trials: int, episodes: int, device):
        self.inner, self.k, self.n = inner, k_trials, episodes
        self.sig = inspect.signature(inner.add)
        missing = {"ended", "trial_idx", "egos"} - set(self.sig.parameters)
        if missing:
            raise TypeError(f"{type(inner).__name__}.add has no argument(s) {sorted(missing)}: PairedTrials reads them by name")
        self.egos = torch.zeros(num_envs, episodes, k_trials, num_agents, dtype=torch.bool, device=device)
        self.out: dict[str, torch.Tensor] = {}
        self.episodes_done = torch.zeros(num_envs, dtype=torch.long, device=device)  # (E,)
        self.shape = (num_envs, num_agents)

    def add(self, *args, **kwargs):
        self.inner.add(*args, **kwargs)
        a = self.sig.bind(*args, **kwargs).arguments
        ended, k, egos = a["ended"].bool(), a["trial_idx"].long(), a["egos"].bool()
        rec = ended & (self.episodes_done < self.n)  # (E,) trials to record
        e = rec.nonzero().squeeze(1)
        j, kk = self.episodes_done[e], k[e].clamp(0, self.k - 1)
        self.egos[e, j, kk] = egos[e]
        for name, v in a.items():
            if name == "egos" or not (torch.is_tensor(v) and tuple(v.shape) == self.shape):
                continue
            if name not in self.out:
                self.out[name] = torch.zeros(self.egos.shape, device=self.egos.device)
            self.out[name][e, j, kk] = v[e].float()
        self.episodes_done += (ended & (k >= self.k - 1)).long()

    def read(self):
        return self.inner.read()

    def complete(self) -> bool:
        return bool((self.episodes_done >= self.n).all())

    def summary(self) -> dict[str, float]:
        """Per-trial means over recorded egos and paired trial-k-minus-0 differences (mean, stderr, pairs)."""
        out: dict[str, float] = {}
        vals = dict(self.out)
        if {"goal", "collision", "offroad"} <= set(vals):
            vals["score"] = vals["goal"] * (1 - vals["collision"]) * (1 - vals["offroad"])
        rename = {"goal": "goal_rate", "collision": "collision_rate", "offroad": "offroad_rate", "exit_": "exit_rate",
                  "wrong": "wrong_exit_rate"}  # the names TrialMetrics uses (trials.TRIAL_KEYS)
        for name, v in vals.items():
            key = rename.get(name, name)
            for k in range(self.k):
                m = self.egos[:, :, k]  # (E, N, A)
                out[f"trial_{k}_{key}"] = float(v[:, :, k][m].mean()) if m.any() else float("nan")
            for k in range(1, self.k):
                pair = self.egos[:, :, k] & self.egos[:, :, 0]
                d = (v[:, :, k] - v[:, :, 0])[pair]
                n = int(d.numel())
                out[f"ada_delta_trial_{k}_minus_0_{key}"] = float(d.mean()) if n else float("nan")
                out[f"ada_delta_trial_{k}_minus_0_{key}_stderr"] = float(d.std() / math.sqrt(n)) if n > 1 else float("nan")
                out[f"ada_delta_trial_{k}_minus_0_pairs"] = n
                if name == "score":
                    out[f"ada_delta_trial_{k}_minus_0"] = out[f"ada_delta_trial_{k}_minus_0_{key}"]
        out["episodes_per_env"] = self.n
        out["episodes"] = int(self.episodes_done.clamp(max=self.n).sum())
        out["ego_trials"] = int(self.egos.sum())
        return out

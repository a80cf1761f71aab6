"""Multi-trial episodes (goal_behavior = "trial"): when trials end, and the per-trial metrics.

The contract (../shared/DESIGN.md, "drive: the trial contract"): an episode is K trials of at most
`trial_length` ticks on one scenario. An ego that reaches its goal mid-trial is rewarded and removed
until the trial ends. A trial ends when no ego of the env is still in play or after `trial_length`
ticks; every entity of the env then returns to the episode-start state (the env re-applies its
episode-start initialisation, a pure function of the episode's draws, so trial-start observations are
bit-identical) with `truncations = trial_ended = 1` for every ego. After the K-th trial
`terminals = 1` and the env starts a new episode on a freshly sampled scene in the same step.
"""

from __future__ import annotations

import torch

TRIAL_KEYS = ("score", "goal_rate", "collision_rate", "offroad_rate", "length", "exit_rate", "wrong_exit_rate")


def trial_end_flags(trial_step: torch.Tensor, trial_length: int, any_in_play: torch.Tensor,
                    trial_idx: torch.Tensor, k_trials: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per env (E,): (trial ended, ended by timeout, episode ended = the K-th trial ended).

    trial_step: ticks since the trial started (after this step's tick); any_in_play: an ego is still in play."""
    timeout = trial_step >= trial_length
    ended = timeout | ~any_in_play
    return ended, timeout & any_in_play, ended & (trial_idx >= k_trials - 1)


class TrialMetrics:
    """Per-trial-index sums over finished ego-trials, on device, for any K."""

    def __init__(self, k_trials: int, device: torch.device):
        self.k = k_trials
        self.acc = torch.zeros(k_trials, len(TRIAL_KEYS) + 1, device=device)  # sums ..., ego count
        self.ends = torch.zeros(2, device=device)  # trials completed, of which by timeout

    def add(self, ended: torch.Tensor, timeout: torch.Tensor, trial_idx: torch.Tensor, egos: torch.Tensor,
            goal: torch.Tensor, collision: torch.Tensor, offroad: torch.Tensor, length: torch.Tensor,
            exit_: torch.Tensor | None = None, wrong: torch.Tensor | None = None) -> None:
        """ended/timeout/trial_idx (E,); egos (E, A) bool controlled; outcomes (E, A) float.

        exit_: reached any exit (hidden-goal candidates; else the goal is the one exit); wrong: a wrong exit."""
        exit_ = goal if exit_ is None else exit_
        wrong = torch.zeros_like(goal) if wrong is None else wrong
        score = goal * (1 - collision) * (1 - offroad)
        vals = torch.stack([score, goal, collision, offroad, length, exit_, wrong, torch.ones_like(goal)], -1)  # (E, A, 8)
        m = (egos & ended.unsqueeze(1)).unsqueeze(-1)
        per_env = (vals * m).sum(1)  # (E, 8)
        self.acc.index_add_(0, trial_idx.clamp(0, self.k - 1), per_env)
        self.ends += torch.stack([ended.sum(), timeout.sum()]).float()

    def read(self) -> dict[str, torch.Tensor]:
        mean = self.acc[:, :-1] / self.acc[:, -1:].clamp_min(1.0)  # (K, len(TRIAL_KEYS))
        out: dict[str, torch.Tensor] = {}
        for k in range(self.k):
            for i, name in enumerate(TRIAL_KEYS):
                out[f"trial_{k}_{name}"] = mean[k, i]
        for k in range(1, self.k):
            delta = mean[k] - mean[0]
            out[f"ada_delta_trial_{k}_minus_0"] = delta[0]
            for i, name in enumerate(TRIAL_KEYS):
                out[f"ada_delta_trial_{k}_minus_0_{name}"] = delta[i]
        out["n_trials_completed"] = self.ends[0].clone()
        out["trial_timeout_rate"] = self.ends[1] / self.ends[0].clamp_min(1.0)
        self.acc.zero_()
        self.ends.zero_()
        return out

"""Why PPO does not adapt on the hidden-exit benchmark: a short training run and four measurements of its policy.

Trains the transformer on `presets.hidden_exit` (with `--set` overrides) for `--steps` agent-steps, then on the
held-out T-mazes (`presets.HIDDEN_EXIT_HELD_OUT`, 64 envs):

1. choice: the exit reached in trial 0 and trial 1 of `--episodes` episodes per env (sampled actions), per
   scene: the share of the scene's majority exit, and which side (left / right of the start heading) it is;
   the switch rate in trial 1 after a wrong and after a true first exit;
2. report: two worlds that differ only in the true exit, trial 0 stepped in lockstep with shared sampling
   noise (so identical until the report), then the KL between the policy's action distributions and the value
   gap at the first step of trial 1 (does the report reach the policy at all?);
3. forced: the first L ticks of trial 0 forced to full steering to one side, then the policy: which side's
   exit it reaches (can it finish a turn it did not choose?).

    python benchmarks/drive_adapt_diag.py --steps 400000
    python benchmarks/drive_adapt_diag.py --steps 1200000 --set ppo.aux_task_coef=0 policy.task_classes=0

Prints ONE JSON line last.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import time

import torch

from ttlab.drive.adapt import held_out_env, train_hidden_exit
from ttlab.drive.adapt_eval import exit_flag
from ttlab.drive.policy.dist import sample
from ttlab.drive.sim.state import SimState

DESIGN = {"intent": True}  # set from --design in main


def _side(pool, scene: int, m: int) -> int:
    """+1 when candidate m of the scene's ego lies left of its start heading, else -1."""
    x, y = pool.pos[scene, 0, 0].tolist()
    h = float(pool.heading[scene, 0, 0])
    cx, cy = pool.goal_candidates[scene, 0, m].tolist()
    return 1 if math.cos(h) * (cy - y) - math.sin(h) * (cx - x) > 0 else -1


@torch.no_grad()
def _roll(pol, env, episodes: int, forced: tuple[int, int] | None = None) -> list[list[int]]:
    """[scene, true exit, exit reached in trial 0, in trial 1] per episode (-1 = none); forced = (action, ticks)."""
    E = env.num_envs
    obs = env.reset().reshape(E, -1).float()
    state = pol.initial_state(E, env.device)
    term, removed = torch.ones(E, dtype=torch.bool), torch.zeros(E, dtype=torch.bool)
    cur = {e: [int(env.scene[e]), int(env.true_goal[e, 0]), -1, -1] for e in range(E)}
    rec, nep = [], torch.zeros(E, dtype=torch.long)
    while int(nep.min()) < episodes:
        logits, _, state = pol.forward_eval(obs, state, term, removed)
        a = sample(logits, False)
        if forced is not None:
            a = torch.where((env.trial == 0) & (env.trial_step < forced[1]), torch.full_like(a, forced[0]), a)
        k = env.trial.clone()
        res = env.step(a.reshape(E, 1))
        f = exit_flag(env, res.obs)[:, 0]
        for e in torch.nonzero(f != 0).flatten().tolist():
            tg = cur[e][1]
            if cur[e][2 + int(k[e])] == -1:
                cur[e][2 + int(k[e])] = tg if f[e] > 0 else 1 - tg
        ended = env.ep_step == 0
        for e in torch.nonzero(ended).flatten().tolist():
            if nep[e] < episodes:
                rec.append(cur[e])
            nep[e] += 1
            cur[e] = [int(env.scene[e]), int(env.true_goal[e, 0]), -1, -1]
        obs, term = res.obs.reshape(E, -1).float(), ended
        removed = ((env.state.removed | env.state.stopped) & res.controlled).reshape(-1)
    return rec


def choice_stats(pol, episodes: int) -> dict:
    env = held_out_env(num_envs=64, intent=DESIGN['intent'])
    rec = _roll(pol, env, episodes)
    by = collections.defaultdict(list)
    for s, _, c0, _ in rec:
        if c0 >= 0:
            by[s].append(c0)
    share = [max(sum(v), len(v) - sum(v)) / len(v) for v in by.values() if len(v) >= 4]
    left0 = [_side(env.pool, s, c0) > 0 for s, _, c0, _ in rec if c0 >= 0]
    left1 = [_side(env.pool, s, c1) > 0 for s, _, _, c1 in rec if c1 >= 0]
    pairs = [(tg, c0, c1) for _, tg, c0, c1 in rec if c0 >= 0 and c1 >= 0]
    wrong = [c1 != c0 for tg, c0, c1 in pairs if c0 != tg]
    right = [c1 != c0 for tg, c0, c1 in pairs if c0 == tg]
    return {"episodes": len(rec), "majority_exit_share_per_scene": round(sum(share) / len(share), 3),
            "trial_0_left_share": round(sum(left0) / max(1, len(left0)), 3),
            "trial_1_left_share": round(sum(left1) / max(1, len(left1)), 3),
            "switch_after_wrong": round(sum(wrong) / max(1, len(wrong)), 3),
            "switch_after_goal": round(sum(right) / max(1, len(right)), 3)}


@torch.no_grad()
def report_stats(pol, seed: int = 3) -> dict:
    envs = []
    for flip in (False, True):
        env = held_out_env(num_envs=64, intent=DESIGN['intent'])
        env.reset()
        if flip:  # the same draws, the other true exit
            env.true_goal = (env.true_goal + 1) % 2
            env.start = env._start_state()
            env.state = SimState(**{k: v.clone() for k, v in vars(env.start).items()})
        envs.append(env)
    E = 64
    obs = [e._observe(e.state).reshape(E, -1).float().clone() for e in envs]
    states = [pol.initial_state(E) for _ in envs]
    term = [torch.ones(E, dtype=torch.bool)] * 2
    rem = [torch.zeros(E, dtype=torch.bool)] * 2
    g = torch.Generator().manual_seed(seed)
    for t in range(envs[0].cfg.trial_length + 1):
        u = torch.rand(E, pol.num_actions, generator=g)
        gumbel = -torch.log(-torch.log(u.clamp(1e-20, 1 - 1e-7)))
        out = []
        for i in range(2):
            logits, v, states[i] = pol.forward_eval(obs[i], states[i], term[i], rem[i])
            out.append((logits, v))
        if t == envs[0].cfg.trial_length:  # the first step of trial 1
            p0, p1 = torch.log_softmax(out[0][0], -1), torch.log_softmax(out[1][0], -1)
            kl = (p0.exp() * (p0 - p1)).sum(-1)
            return {"trial_1_start_kl_mean": round(float(kl.mean()), 3), "trial_1_start_kl_max": round(float(kl.max()), 3),
                    "trial_1_start_value_gap_mean": round(float((out[0][1] - out[1][1]).abs().mean()), 3)}
        for i in range(2):
            res = envs[i].step((out[i][0] + gumbel).argmax(-1).reshape(E, 1))
            obs[i] = res.obs.reshape(E, -1).float()
            term[i] = envs[i].ep_step == 0
            rem[i] = ((envs[i].state.removed | envs[i].state.stopped) & res.controlled).reshape(-1)
    raise AssertionError("unreachable")


def forced_stats(pol) -> dict:
    env = held_out_env(num_envs=64, intent=DESIGN['intent'])
    lon, lat = env.tables
    neutral = lon.abs() == lon.abs().min()
    out = {}
    for name, val in (("left", lat.max()), ("right", lat.min())):
        a = int(torch.nonzero(neutral & (lat == val))[0])
        for ticks in (10, 20):
            rec = _roll(pol, env, 1, forced=(a, ticks))
            sides = [_side(env.pool, s, c0) for s, _, c0, _ in rec if c0 >= 0]
            out[f"forced_{name}_{ticks}"] = {"left": sum(x > 0 for x in sides), "right": sum(x < 0 for x in sides),
                                             "none": len(rec) - len(sides)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=400_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--episodes", type=int, default=16, help="episodes per held-out env for the choice statistics")
    ap.add_argument("--design", default="intent", choices=("intent", "steer"),
                    help="intent: presets.hidden_exit (exit intent); steer: steering only (hidden_exit(intent=False))")
    ap.add_argument("--set", nargs="*", default=[], help="preset overrides section.field=value (or scenarios=...)")
    args = ap.parse_args()
    DESIGN["intent"] = args.design == "intent"
    torch.set_num_threads(1)
    t0, load0 = time.perf_counter(), os.getloadavg()
    overrides = dict(kv.split("=", 1) for kv in args.set)
    pol, curve, facts = train_hidden_exit("transformer", args.seed, steps=args.steps, log=print, intent=DESIGN["intent"],
                                         **overrides)
    result = {"benchmark": "drive_adapt_diag", "design": args.design, "overrides": overrides, "agent_steps": facts["agent_steps"],
              "train_wall_s": facts["train_wall_s"], "loadavg_start": [round(x, 2) for x in load0],
              "train_last": {k: curve[-1].get(k) for k in ("trial_0_goal_rate", "trial_1_goal_rate",
                                                           "trial_0_exit_rate", "task_accuracy")},
              **choice_stats(pol, args.episodes), **report_stats(pol), **forced_stats(pol),
              "wall_s": round(time.perf_counter() - t0, 1)}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

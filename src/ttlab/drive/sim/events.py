"""What this tick's events do to the egos: removal, stopping, and the exit report step (pure functions).

An ego in play that collides or goes offroad is removed or stopped as EnvConfig.collision_behavior /
offroad_behavior say; a reached goal removes it in trial mode and stops it with goal_behavior "stop". With exit
feedback (hidden-goal trial mode) reaching any candidate exit starts a report step instead, which ends in removal.
Every argument is (E, A); the behaviours are the config's strings.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class ReportState(NamedTuple):
    """An ego's exit-report fields after the tick, (E, A) each."""

    exit_flag: torch.Tensor  # float: +1 true / -1 wrong exit reported, else 0
    report_left: torch.Tensor  # float: report steps still to come
    speed: torch.Tensor  # float: 0 for an ego whose report step starts now


def leave_play(reached: torch.Tensor, wrong: torch.Tensor, collided: torch.Tensor, offroad: torch.Tensor,
               reporting: torch.Tensor, report_left: torch.Tensor, *, collision_behavior: str,
               offroad_behavior: str, goal_behavior: str, feedback: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(remove_now, stop_now) (E, A) bool: egos leaving play this tick, off the map or frozen in place.

    reached / wrong: the true / a wrong goal reached in play; collided / offroad: this tick's events in play;
    reporting: egos in their report step, report_left their report steps left before this tick."""
    remove_now = (reporting & (report_left <= 1)) if feedback else wrong.clone()
    stop_now = torch.zeros_like(reached)
    for ev, how in ((collided, collision_behavior), (offroad, offroad_behavior)):
        if how == "remove":
            remove_now = remove_now | ev
        elif how == "stop":
            stop_now = stop_now | ev
    if goal_behavior == "trial" and not feedback:
        remove_now = remove_now | reached
    elif goal_behavior == "stop":
        stop_now = stop_now | reached
    return remove_now, stop_now & ~remove_now


def report_step(reached: torch.Tensor, wrong: torch.Tensor, out_now: torch.Tensor, reporting: torch.Tensor,
                remove_now: torch.Tensor, exit_flag: torch.Tensor, report_left: torch.Tensor, speed: torch.Tensor,
                report_steps: int) -> ReportState:
    """Exit feedback: an exit reached in play (and not left by another event) starts `report_steps` report steps
    with the exit flag shown and the ego halted; a reporting ego not removed now counts one down."""
    exit_now = (reached | wrong) & ~out_now  # (E, A) starts its report step
    more = reporting & ~remove_now  # (E, A) another report step follows
    zero = torch.zeros_like(exit_flag)
    flag = torch.where(exit_now, torch.where(reached, 1.0, -1.0), torch.where(more, exit_flag, zero))
    left = torch.where(exit_now, float(report_steps), torch.where(more, report_left - 1, zero))
    return ReportState(flag, left, torch.where(exit_now, torch.zeros_like(speed), speed))

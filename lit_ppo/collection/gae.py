"""Generalized advantage estimation as a pure function of one rollout, and how well the acting values predicted the
returns it gives (explained variance)."""

import torch
from torch import Tensor

from lit_ppo.collection.rollout import Rollout


def compute_gae(
    rewards: Tensor,
    values: Tensor,
    next_values: Tensor,
    terminated: Tensor,
    dones: Tensor,
    gamma: float,
    gae_lambda: float,
) -> tuple[Tensor, Tensor]:
    """GAE(lambda) advantages and returns for a ``[T, N]`` rollout.

    ``next_values[t]`` is V(s_{t+1}) for the observation that really followed step t: the next step's
    observation while the episode goes on, and the *final* observation when it was truncated. The bootstrap
    is masked by ``terminated`` (no value after a true end) and the trace is cut by ``dones``
    (terminated or truncated: the next step belongs to another episode). This makes time-limit truncation
    right by construction.
    """
    not_terminated = 1.0 - terminated.float()
    not_done = 1.0 - dones.float()
    deltas = rewards + gamma * next_values * not_terminated - values
    advantages = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[0])
    for t in range(rewards.shape[0] - 1, -1, -1):
        last = deltas[t] + gamma * gae_lambda * not_done[t] * last
        advantages[t] = last
    return advantages, advantages + values


def explained_variance(predicted: Tensor, target: Tensor) -> float:
    """1 - Var(target - predicted) / Var(target): 1 is perfect, 0 no better than a constant; nan if Var(target)=0."""
    var_target = target.var()
    if var_target == 0:
        return float("nan")
    return float(1.0 - (target - predicted).var() / var_target)


def recompute_gae(rollout: Rollout, values: Tensor, last_values: Tensor, final_values: Tensor) -> tuple[Tensor, Tensor]:
    """GAE(lambda) advantages and returns of ``rollout`` (one with :attr:`Rollout.has_trace`) under other value
    estimates: ``values`` ``[B]`` of its samples, ``last_values`` ``[num_envs]`` of ``rollout.next_obs`` and
    ``final_values`` ``[K]`` of ``rollout.final_obs``; the same trace as the collector's (:func:`compute_gae`),
    so that the acting values give back the rollout's own advantages. Tianshou's ``recompute_advantage``: with
    the critic of the update's current epoch, the later epochs learn from fresher advantages."""
    n = last_values.shape[0]
    t = rollout.size // n
    next_values = torch.cat([values[n:], last_values]).clone()
    next_values[rollout.final_index] = final_values  # same-step: a truncated episode's own final observation
    shape = (t, n)
    return tuple(x.flatten() for x in compute_gae(
        rollout.rewards.view(shape), values.view(shape), next_values.view(shape), rollout.terminated.view(shape),
        rollout.dones.view(shape), rollout.gamma, rollout.gae_lambda))

"""Deterministic evaluation: play one episode per environment with the policy's mode action."""

import numpy as np
import torch
from torch import Tensor

from lit_ppo.networks import ActorCritic


@torch.inference_mode()
def evaluate_policy(policy: ActorCritic, envs, episodes: int, seed: int) -> tuple[Tensor, Tensor]:
    """Returns and lengths of the first episode of each of ``episodes`` environments (``envs.num_envs``)."""
    assert envs.num_envs == episodes, "one environment per evaluation episode"
    obs, _ = envs.reset(seed=seed)
    returns = np.zeros(episodes)
    lengths = np.zeros(episodes, dtype=np.int64)
    finished = np.zeros(episodes, dtype=bool)
    while not finished.all():
        action, _, _ = policy.act(torch.as_tensor(obs, dtype=torch.float32), deterministic=True)
        obs, reward, terminated, truncated, _ = envs.step(action.numpy())
        running = ~finished
        returns[running] += reward[running]
        lengths[running] += 1
        finished |= terminated | truncated
    return torch.as_tensor(returns, dtype=torch.float32), torch.as_tensor(lengths)

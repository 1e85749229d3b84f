"""Deterministic evaluation: play one episode per environment with the policy's mode action (a Gaussian's mean).

Observations and actions go through the same conversions as in training (:mod:`lit_ppo.envs.spaces`); normalization
statistics are the policy's own and are not updated here.
"""

import numpy as np
import torch
from torch import Tensor

from lit_ppo.envs.spaces import actions_to_env, observations_to_tensor


@torch.inference_mode()
def evaluate_policy(policy, envs, episodes: int, seed: int, action_masks=None) -> tuple[Tensor, Tensor]:
    """Returns and lengths of the first episode of each of ``episodes`` environments (``envs.num_envs``);
    with ``action_masks`` (a :class:`lit_ppo.collection.action_masks.ActionMaskReader`), the best valid action."""
    assert envs.num_envs == episodes, "one environment per evaluation episode"
    obs_space, action_space = envs.single_observation_space, envs.single_action_space
    obs, info = envs.reset(seed=seed)
    returns = np.zeros(episodes)
    lengths = np.zeros(episodes, dtype=np.int64)
    finished = np.zeros(episodes, dtype=bool)
    step = 0
    state = policy.initial_state(episodes)  # a recurrent policy's memory, zeros at the episodes' start (None: none)
    while not finished.all():
        masked = {} if action_masks is None else {"action_mask": action_masks.read(envs, info, step)}
        action, _, _, state = policy.act(observations_to_tensor(obs, obs_space), deterministic=True, state=state,
                                         **masked)
        obs, reward, terminated, truncated, info = envs.step(actions_to_env(action, action_space))
        step += 1
        running = ~finished
        returns[running] += reward[running]
        lengths[running] += 1
        finished |= terminated | truncated
    return torch.as_tensor(returns, dtype=torch.float32), torch.as_tensor(lengths)

"""A trained policy for Python code: :func:`load_policy` and :meth:`TrainedPolicy.predict`, Stable-Baselines3's
``model.predict`` on what gymnasium gives.

.. code-block:: python

    import gymnasium as gym
    import lit_ppo

    policy = lit_ppo.load_policy("runs/cartpole/checkpoints/last.ckpt")
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    state, done = None, True
    while True:
        action, state = policy.predict(obs, state=state, episode_start=done, deterministic=True)
        obs, reward, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
        if done:
            break

numpy in, numpy out, one observation or a batch of them (a vector env's), on the CPU unless ``device`` says
otherwise. Everything training applied applies here, in the same code: the observations are converted as rollouts
convert them (:func:`lit_ppo.envs.spaces.observations_to_tensor`; Dict and Tuple observations included) and normalized by
the statistics saved with the policy; actions go to the environment as in training (Box actions clipped to the
bounds, Discrete indices shifted by ``start``). A recurrent policy takes its state and returns the next one
(``None`` at the first step; ``episode_start`` marks the inputs that begin an episode, where the state is zeroed, as
in training). A policy trained with ``data.action_masks`` needs ``action_masks`` (True = valid).
"""

from typing import Any, Optional, Union

import numpy as np
import torch
from gymnasium import spaces

from lit_ppo.envs.spaces import actions_to_env, batch_observations, observations_to_tensor
from lit_ppo.networks.actor_critic import ActorCritic


def env_spaces(data: dict[str, Any]) -> tuple[spaces.Space, spaces.Space]:
    """The single-environment spaces of the data settings ``data`` (a checkpoint's ``datamodule_hyper_parameters``),
    made as training made its environments (:func:`lit_ppo.envs.make.env_spaces`)."""
    from lit_ppo.envs.make import env_spaces as spaces_of

    return spaces_of(data.get("env_id", "CartPole-v1"), data.get("env_kwargs"), data.get("wrappers"),
                     data.get("vectorization", "sync"), data.get("num_envs", 1))


def is_batched(observation: Any, space: spaces.Space) -> bool:
    """Whether ``observation`` is a batch of observations of ``space`` (a leading axis) or a single one; anything
    else raises a ValueError naming both shapes."""
    if isinstance(space, spaces.Dict):
        key = next(iter(space.spaces))
        return is_batched(observation[key], space[key])
    if isinstance(space, spaces.Tuple):
        return is_batched(observation[0], space[0])
    shape = np.shape(observation)
    if shape == space.shape:
        return False
    if shape[1:] == space.shape and len(shape) == len(space.shape) + 1:
        return True
    raise ValueError(f"observation of shape {shape} is neither one observation of {space} (shape {space.shape}) nor "
                     f"a batch of them (shape (n, {', '.join(map(str, space.shape))}))")


class TrainedPolicy:
    """A trained lit_ppo policy, for acting from Python (see the module docstring); :func:`load_policy` makes one.

    Args:
        policy: the :class:`lit_ppo.networks.actor_critic.ActorCritic` (its weights and normalization statistics).
        observation_space: a single environment's observation space.
        action_space: a single environment's action space.
        action_masks: the policy was trained with invalid-action masks, so :meth:`predict` needs them.
        device: where the network runs (``"cpu"`` by default).
    """

    def __init__(self, policy: ActorCritic, observation_space: spaces.Space, action_space: spaces.Space,
                 action_masks: bool = False, device: Union[str, torch.device] = "cpu") -> None:
        self.device = torch.device(device)
        self.policy = policy.to(self.device).eval()
        self.observation_space, self.action_space, self.action_masks = observation_space, action_space, action_masks

    @property
    def recurrent(self) -> bool:
        """The policy carries a state from step to step (``model.recurrent``)."""
        return self.policy.state_size > 0

    @torch.inference_mode()
    def predict(self, observation: Any, state: Optional[np.ndarray] = None, episode_start: Any = None,
                deterministic: bool = False, action_masks: Optional[np.ndarray] = None
                ) -> tuple[np.ndarray, Optional[np.ndarray]]:
        """The action for ``observation`` (one, or a batch ``[n, ...]``) and the recurrent state after it.

        Args:
            observation: as the environment returns it (a vector env's batch, or one environment's).
            state: a recurrent policy's state from the previous call (None: zeros, an episode's start); ignored
                by a feed-forward policy.
            episode_start: bool, or ``[n]`` bools: which inputs begin an episode (the state is zeroed there).
            deterministic: the distribution's mode instead of a sample (SB3's default is a sample, and so is this).
            action_masks: ``[mask_size]`` or ``[n, mask_size]`` bools, True = valid; needed by a policy trained with
                masks, refused by one trained without.

        Returns:
            ``(action, state)``: the action as the environment takes it (one, or ``[n, ...]``), and the next state
            (``[state_size]`` or ``[n, state_size]`` float32; None for a feed-forward policy).
        """
        batched = is_batched(observation, self.observation_space)
        obs = (observations_to_tensor(observation, self.observation_space) if batched
               else batch_observations([observation], self.observation_space))
        n = obs.shape[0]
        extra: dict[str, torch.Tensor] = {}
        if self.recurrent:
            extra["state"] = (self.policy.initial_state(n) if state is None
                              else torch.as_tensor(np.asarray(state, np.float32)).reshape(n, -1).to(self.device))
            starts = np.zeros(n, bool) if episode_start is None else np.asarray(episode_start, bool)
            extra["starts"] = torch.as_tensor(np.broadcast_to(starts, (n,)).copy(), device=self.device)
        if self.action_masks and action_masks is None:
            raise ValueError("this policy was trained with action masks (data.action_masks): pass action_masks=..., "
                             "True for each valid action")
        if action_masks is not None:
            if not self.action_masks:
                raise ValueError("this policy was trained without action masks: action_masks would change what it "
                                 "does; leave it out")
            extra["action_mask"] = torch.as_tensor(np.asarray(action_masks, bool)).reshape(n, -1).to(self.device)
        action, _, _, next_state = self.policy.act(obs.to(self.device), deterministic=deterministic, **extra)
        env_action = actions_to_env(action.cpu(), self.action_space)
        next_state = None if next_state is None else next_state.cpu().numpy()
        if batched:
            return env_action, next_state
        return env_action[0], None if next_state is None else next_state[0]

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

from lit_ppo.envs.spaces import action_spec, actions_to_env, batch_observations, observations_to_tensor
from lit_ppo.networks.actor_critic import ActorCritic
from lit_ppo.networks.distributions import CategoricalHead, make_head


def env_spaces(data: dict[str, Any]) -> tuple[spaces.Space, spaces.Space]:
    """The single-environment spaces of the data settings ``data`` (a checkpoint's ``datamodule_hyper_parameters``),
    made as training made its environments (:func:`lit_ppo.envs.env_spec.env_spaces`)."""
    from lit_ppo.envs.env_spec import env_spaces as spaces_of

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
        self.device = usable_device(device)
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
        check_predict_inputs(self, observation, batched, state, action_masks)
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


# -- what predict refuses: each argument named, with what it should be (a NaN observation would give a NaN action) --
def usable_device(device: Union[str, torch.device]) -> torch.device:
    """``device`` as a torch device, tried with a tensor there; a ValueError naming it where none can be used."""
    try:
        parsed = torch.device(device)
        torch.empty(0, device=parsed)
    except (RuntimeError, AssertionError, TypeError) as err:  # torch's words for a device it has not got
        available = "a CUDA GPU is usable here" if torch.cuda.is_available() else "no CUDA GPU is usable here"
        raise ValueError(f"device: {str(device)!r} cannot be used ({type(err).__name__}: "
                         f"{str(err).splitlines()[0][:160]}); {available}: use device='cpu'") from None
    return parsed


def _parts(observation: Any, space: spaces.Space):
    """``(name, array, part space)`` of each part of an observation (Dict and Tuple parts by key or index)."""
    if isinstance(space, (spaces.Dict, spaces.Tuple)):
        keys = list(space.spaces) if isinstance(space, spaces.Dict) else range(len(space.spaces))
        for key in keys:
            for name, array, part in _parts(observation[key], space[key]):
                yield f"[{key!r}]{name}", array, part
        return
    yield "", np.asarray(observation), space


def check_predict_inputs(policy: "TrainedPolicy", observation: Any, batched: bool, state: Any, action_masks: Any
                         ) -> None:
    """A ValueError naming the argument and what it should be, for what the policy must not act on: an observation
    that is not numbers or not finite, an action mask of the wrong size or with no valid action (refused as in
    training), a recurrent state of the wrong size or not finite."""
    n = 1
    for name, array, part in _parts(observation, policy.observation_space):
        if array.dtype.kind not in "biuf":  # bool, signed, unsigned, float
            raise ValueError(f"observation{name}: expected numbers for {part}, got an array of {array.dtype} "
                             f"({array.reshape(-1)[:3].tolist()}...)")
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            where = np.argwhere(~np.isfinite(array))[0].tolist()
            raise ValueError(f"observation{name}: non-finite value {array[tuple(where)]} at index {where}; the policy "
                             "would act on NaN/inf (fix the environment or the observation before predict)")
        n = array.shape[0] if batched and array.ndim else n
    expected = (lambda size: f"({size},) for one observation or (n, {size}) for a batch of n, here "
                f"{(n, size) if batched else (size,)}")
    if action_masks is not None and policy.action_masks:
        head = make_head(action_spec(policy.action_space))
        masks = np.asarray(action_masks)
        if masks.shape not in ([(n, head.mask_size)] if batched else [(head.mask_size,), (1, head.mask_size)]):
            raise ValueError(f"action_masks: shape {masks.shape} does not fit {policy.action_space}: expected "
                             f"{expected(head.mask_size)} booleans, True = valid")
        valid = head.components_valid(torch.as_tensor(masks.astype(bool)).reshape(n, -1))
        if not bool(valid.all()):
            row = int((~valid).nonzero()[0, 0])
            whole = isinstance(head, CategoricalHead)
            raise ValueError(f"action_masks: row {row} allows no action{'' if whole else ' for some component'}: "
                             f"{masks.reshape(n, -1)[row].astype(bool).tolist()}. Every state needs at least one "
                             "valid action.")
    if state is not None and policy.recurrent:
        size = policy.policy.state_size
        array = np.asarray(state)
        if array.shape not in ([(n, size)] if batched else [(size,), (1, size)]):
            raise ValueError(f"state: shape {array.shape} does not fit this policy's recurrent state: expected "
                             f"{expected(size)} (the state predict returned; None at an episode's start)")
        if array.dtype.kind not in "biuf" or not np.isfinite(array).all():
            raise ValueError("state: not finite numbers; pass the state predict returned (None at an episode's "
                             "start)")

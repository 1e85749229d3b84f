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
convert them (:func:`lit_ppo.spaces.observations_to_tensor`; Dict and Tuple observations included) and normalized by
the statistics saved with the policy; actions go to the environment as in training (Box actions clipped to the
bounds, Discrete indices shifted by ``start``). A recurrent policy takes its state and returns the next one
(``None`` at the first step; ``episode_start`` marks the inputs that begin an episode, where the state is zeroed, as
in training). A policy trained with ``data.action_masks`` needs ``action_masks`` (True = valid).
"""

import json
from pathlib import Path
from typing import Any, Callable, Optional, Union

import numpy as np
import torch
from gymnasium import spaces

from lit_ppo.checkpoint_files import CheckpointError, check_checkpoint_file
from lit_ppo.networks import ActorCritic
from lit_ppo.spaces import actions_to_env, batch_observations, observations_to_tensor


def env_spaces(data: dict[str, Any]) -> tuple[spaces.Space, spaces.Space]:
    """The single-environment spaces of the data settings ``data`` (a checkpoint's ``datamodule_hyper_parameters``),
    made as training made its environments (:func:`lit_ppo.envs.env_spaces`)."""
    from lit_ppo.envs import env_spaces as spaces_of

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
        policy: the :class:`lit_ppo.networks.ActorCritic` (its weights and normalization statistics).
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


class ExportedActor:
    """What a :class:`TrainedPolicy` acts with for a file ``lit_ppo export`` wrote: ``act`` runs the file (ONNX
    through onnxruntime, TorchScript through torch), on the CPU. The file is deterministic or stochastic as it was
    exported, and takes its masks and state as inputs (:mod:`lit_ppo.tools.export`)."""

    def __init__(self, run: Callable[..., list[torch.Tensor]], state_size: int, deterministic: bool) -> None:
        self.run, self.state_size, self.deterministic = run, state_size, deterministic

    def to(self, device: torch.device) -> "ExportedActor":
        if torch.device(device).type != "cpu":
            raise ValueError("an exported file acts on the CPU here; load the checkpoint for another device")
        return self

    def eval(self) -> "ExportedActor":
        return self

    def initial_state(self, n: int) -> Optional[torch.Tensor]:
        return torch.zeros((n, self.state_size)) if self.state_size else None

    def act(self, obs: torch.Tensor, deterministic: bool = False, action_mask: Optional[torch.Tensor] = None,
            state: Optional[torch.Tensor] = None, starts: Optional[torch.Tensor] = None):
        if deterministic != self.deterministic:
            kind = "deterministic (the mode)" if self.deterministic else "stochastic (samples)"
            raise ValueError(f"this file was exported {kind}: call predict(..., deterministic={self.deterministic}), "
                             "or export again (--stochastic for samples)")
        inputs = [obs]
        if self.state_size:  # the file's caller zeroes the state where an episode starts, as the policy would
            inputs.append(state if starts is None else state * (~starts).unsqueeze(-1).to(state.dtype))
        if action_mask is not None:
            inputs.append(action_mask)
        outputs = self.run(*inputs)
        return outputs[0], None, None, (outputs[1] if self.state_size else None)


def load_exported_policy(path: Path, device: Union[str, torch.device] = "cpu") -> TrainedPolicy:
    """A file ``lit_ppo export`` wrote (``.onnx``, ``.pt``) as a :class:`TrainedPolicy`: its metadata names the
    environment, whose spaces convert the observations and actions as for a checkpoint."""
    from lit_ppo.tools.export import load_exported

    fmt = "onnx" if path.suffix == ".onnx" else "torchscript"
    try:
        if fmt == "onnx":
            import onnx

            props = {p.key: p.value for p in onnx.load(str(path), load_external_data=False).metadata_props}
            text = props.get("lit_ppo")
        else:
            buffer = getattr(torch.jit.load(str(path)), "lit_ppo", None)
            text = None if buffer is None else bytes(buffer.tolist()).decode()
        run = load_exported(path, fmt)
    except Exception as err:
        raise CheckpointError(f"{path}: not a file lit_ppo export wrote ({type(err).__name__}: {err})") from None
    if text is None or run is None:
        raise CheckpointError(f"{path}: no lit_ppo metadata (exported before 2026-12-02, or by other tools), or "
                              "onnxruntime is missing; export the checkpoint again, or load the checkpoint itself")
    meta = json.loads(text)
    observation_space, action_space = env_spaces({k: v for k, v in meta["data"].items() if v is not None})
    actor = ExportedActor(run, int(meta["state_size"]), bool(meta["deterministic"]))
    return TrainedPolicy(actor, observation_space, action_space, action_masks=bool(meta["action_masks"]),
                         device=device)


def load_policy(path: Union[str, Path], device: Union[str, torch.device] = "cpu") -> TrainedPolicy:
    """The policy of a lit_ppo checkpoint (``last.ckpt``, ``best.ckpt``) or of a file ``lit_ppo export`` wrote
    (``.onnx``, ``.pt``: CPU only, deterministic or stochastic as exported), ready to
    :meth:`~TrainedPolicy.predict`, without a Trainer and without importing Lightning. The environment is made once
    to read its spaces (so its package must be importable, as for ``validate``). A file that is not a lit_ppo
    checkpoint raises :class:`lit_ppo.checkpoint_files.CheckpointError`.

    Args:
        path: the checkpoint file ``fit`` wrote.
        device: where the network runs (``"cpu"`` by default).
    """
    if Path(path).suffix in (".onnx", ".pt"):
        return load_exported_policy(Path(path), device)
    checkpoint = check_checkpoint_file(str(path))
    settings = checkpoint.get("hyper_parameters") or {}
    if "env_spec" not in settings:
        raise CheckpointError(f"{path}: no lit_ppo settings in it (hyper_parameters.env_spec): load a checkpoint "
                              "that `python -m lit_ppo fit` wrote")
    # PPOModule's policy rebuilt as PPOModule builds it, without Lightning: acting needs only the network
    policy = ActorCritic.from_settings(settings)
    prefix = "policy."
    policy.load_state_dict({key[len(prefix):]: value for key, value in checkpoint["state_dict"].items()
                            if key.startswith(prefix)})
    data = dict(checkpoint.get("datamodule_hyper_parameters") or {})
    data.setdefault("env_id", settings["env_spec"]["env_id"])
    observation_space, action_space = env_spaces(data)
    return TrainedPolicy(policy, observation_space, action_space,
                         action_masks=bool(settings["env_spec"].get("action_masks")), device=device)


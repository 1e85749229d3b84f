"""Building the environments that rollouts play, describing their spaces, and converting between them and tensors.

``data.env_id`` is one of:

- a registered gymnasium id (``Pendulum-v1``);
- gymnasium's ``module:Id`` form (``ale_py:ALE/Breakout-v5``): the module is imported, which registers the id;
- an entry point ``module:Attribute`` (``my_pkg.envs:MyEnv``): a ``gymnasium.Env`` class, or a function returning
  one, that nobody registered; the module is imported from the config.

``data.wrappers`` is a list of gymnasium wrappers applied in order to each environment, each a class path or
``{class_path: ..., init_args: {...}}``.

Spaces become plain data (:func:`describe_spaces`), which the policy is built from and which is saved in
checkpoints. Observations reach the policy through one function, :func:`observations_to_tensor`; actions go back
through :func:`actions_to_env`.
"""

import functools
import importlib
from collections.abc import Sequence
from typing import Any, Optional, Union

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.envs.registration import EnvSpec
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import concatenate, create_empty_array
from torch import Tensor

from lit_ppo.errors import ConfigError
from lit_ppo.networks import leaf_shape, leaf_size, make_head, spec_leaves

SUPPORTED = (
    "observations: Box (vectors; uint8 images H x W x C or C x H x W), Discrete, MultiDiscrete, MultiBinary, "
    "and Dict/Tuple of these (nested too); actions: Discrete, Box, MultiDiscrete, MultiBinary"
)
VECTORIZATION_MODES = ("sync", "async")
WrapperConfig = Union[str, dict[str, Any]]


# -- making environments ----------------------------------------------------------------------------------------
def _resolve_env_id(env_id: str) -> Union[str, EnvSpec]:
    """A registered id as it is; ``module:Name`` imports the module, then means the id ``Name`` if that import
    registered it (gymnasium's convention), else the entry point ``module.Name``."""
    if ":" not in env_id:
        return env_id
    module_name, name = env_id.split(":", 1)
    try:
        module = importlib.import_module(module_name)
    except Exception as err:
        raise ConfigError(
            f"data.env_id: {env_id!r}: cannot import module {module_name!r}: {type(err).__name__}: {err}"
        ) from err
    if name in gym.registry:
        return name
    target: Any = module
    for part in name.split("."):
        target = getattr(target, part, None)
    if not callable(target):
        raise ConfigError(
            f"data.env_id: {env_id!r}: module {module_name!r} has no environment class or function {name!r}, "
            f"and no environment id {name!r} is registered."
        )
    return EnvSpec(id=name.rsplit(".", 1)[-1], entry_point=target)


def _resolve_wrapper(index: int, config: WrapperConfig) -> tuple[str, Any]:
    """``(class_path, callable(env) -> env)`` for ``data.wrappers[index]``."""
    key = f"data.wrappers[{index}]"
    if isinstance(config, str):
        class_path, init_args = config, {}
    elif isinstance(config, dict) and "class_path" in config and set(config) <= {"class_path", "init_args"}:
        class_path, init_args = config["class_path"], dict(config.get("init_args") or {})
    else:
        raise ConfigError(f"{key}: expected a class path or {{class_path: ..., init_args: {{...}}}}, got {config!r}.")
    module_name, _, attr = str(class_path).rpartition(".")
    try:
        wrapper = getattr(importlib.import_module(module_name), attr)
    except Exception as err:
        raise ConfigError(f"{key}: cannot import {class_path!r}: {type(err).__name__}: {err}") from err
    return class_path, functools.partial(wrapper, **init_args)


def make_env(
    env_id: str,
    env_kwargs: Optional[dict[str, Any]] = None,
    wrappers: Optional[Sequence[WrapperConfig]] = None,
    **kwargs: Any,
) -> gym.Env:
    """One environment: ``gymnasium.make`` (or the entry point) with ``env_kwargs``, then ``wrappers`` in order.

    Every failure is a :class:`ConfigError` naming the id or the wrapper and what went wrong.
    """
    resolved = _resolve_env_id(env_id)
    try:
        env = gym.make(resolved, **(env_kwargs or {}), **kwargs)
    except gym.error.DependencyNotInstalled as err:  # its message names the pip extra
        raise ConfigError(f"data.env_id: cannot make environment {env_id!r}: {err}") from None
    except gym.error.Error as err:
        raise ConfigError(
            f"data.env_id: cannot make environment {env_id!r}: {err}. Use a registered id (list them with "
            "`python -c 'import gymnasium; gymnasium.pprint_registry()'`) or an entry point 'my_pkg.envs:MyEnv'."
        ) from None
    except Exception as err:
        raise ConfigError(f"data.env_id: cannot make environment {env_id!r}: {type(err).__name__}: {err}") from err
    for index, config in enumerate(wrappers or []):
        class_path, wrap = _resolve_wrapper(index, config)
        try:
            env = wrap(env)
        except Exception as err:
            env.close()
            raise ConfigError(
                f"data.wrappers[{index}]: {class_path} cannot wrap {env_id!r}: {type(err).__name__}: {err}"
            ) from err
    return env


def make_vector_env(
    env_id: str,
    num_envs: int,
    vectorization: str = "sync",
    env_kwargs: Optional[dict[str, Any]] = None,
    wrappers: Optional[Sequence[WrapperConfig]] = None,
    **make_kwargs: Any,
) -> gym.vector.VectorEnv:
    """A vector env of :func:`make_env` environments with same-step autoreset and episode statistics.

    Same-step autoreset hands the real final observation over in ``info["final_obs"]`` at the step that ends an
    episode, which truncation bootstrapping needs (gymnasium's default, next-step, would need a masked reset step).
    """
    if vectorization not in VECTORIZATION_MODES:
        raise ConfigError(f"data.vectorization: {vectorization!r} is not one of {VECTORIZATION_MODES}.")
    # A partial of a module-level function with plain-data arguments pickles into async workers, which
    # resolve the id (and import a user's module) themselves.
    make_one = functools.partial(make_env, env_id, env_kwargs, list(wrappers or []), **make_kwargs)
    vector_cls = gym.vector.SyncVectorEnv if vectorization == "sync" else gym.vector.AsyncVectorEnv
    envs = vector_cls([make_one] * num_envs, autoreset_mode=AutoresetMode.SAME_STEP)
    return gym.wrappers.vector.RecordEpisodeStatistics(envs)


def make_evaluation_env(
    env_id: str,
    num_envs: int,
    env_kwargs: Optional[dict[str, Any]] = None,
    wrappers: Optional[Sequence[WrapperConfig]] = None,
) -> gym.vector.VectorEnv:
    """The vector env of deterministic evaluation: the environment's own vectorized implementation (its spec's
    ``vector_entry_point``, e.g. ``CartPoleVectorEnv``, which steps all environments in one numpy call) where a
    plain registered id has one and no wrappers are configured; otherwise :func:`make_vector_env` (sync).

    Evaluation counts only the first episode of each environment, so a native env's autoreset mode (CartPole's is
    next-step, which training's rollouts cannot use) does not matter here.
    """
    spec = None if wrappers or ":" in env_id else gym.registry.get(env_id)
    kwargs = dict(env_kwargs or {})
    # gym.make applies max_episode_steps with a TimeLimit wrapper (None: the registered limit, -1: none); a native
    # env counts steps itself and needs a positive limit, so it is used only when one is known.
    limit = kwargs.pop("max_episode_steps", None)
    if limit is None and spec is not None:
        limit = spec.max_episode_steps
    native = spec is not None and spec.vector_entry_point is not None and not spec.additional_wrappers
    if native and isinstance(limit, int) and limit > 0:
        try:
            return gym.make_vec(env_id, num_envs, "vector_entry_point", max_episode_steps=limit, **kwargs)
        except (TypeError, gym.error.Error):
            pass  # e.g. a keyword only gym.make takes (disable_env_checker): the sync path takes it or explains it
    return make_vector_env(env_id, num_envs, "sync", env_kwargs, wrappers)


# -- describing spaces as plain data ----------------------------------------------------------------------------
def describe_spaces(
    env_id: str, env_kwargs: Optional[dict[str, Any]] = None, wrappers: Optional[Sequence[WrapperConfig]] = None
) -> dict[str, Any]:
    """Observation and action spaces of ``env_id`` (after ``wrappers``) as plain data: lists, ints, floats,
    strings and bools only, because it is saved in checkpoint hyperparameters (loaded with ``weights_only``).

    ``observation_shape`` is the shape of one observation as the policy receives it (see
    :func:`observations_to_tensor`). Raises a :class:`ConfigError` for unknown ids and for spaces the policy
    cannot handle, before any training.
    """
    env = make_env(env_id, env_kwargs, wrappers)
    try:
        obs_space, act_space = env.observation_space, env.action_space
    finally:
        env.close()
    observation = describe_observation_space(obs_space, f"data.env_id: {env_id!r} has observation space")
    action = describe_action_space(act_space, f"data.env_id: {env_id!r} has action space")
    return {
        "env_id": env_id,
        "observation": observation,
        "observation_shape": list(observation_tensor_shape(observation)),
        "action": action,
    }


def _unsupported(where: str, space: spaces.Space, hint: str = "") -> ConfigError:
    return ConfigError(f"{where} {space}, which is not supported (supported: {SUPPORTED}).{hint}")


def describe_observation_space(space: spaces.Space, where: str = "observation space") -> dict[str, Any]:
    if isinstance(space, spaces.Box):
        shape = [int(s) for s in space.shape]
        spec: dict[str, Any] = {"type": "box", "shape": shape, "dtype": str(space.dtype)}
        # uint8 in [0, 255] with 2 or 3 axes is an image (as SB3 decides): the network scales it to [0, 1], maybe
        # with a CNN. Other uint8 boxes (a board with cells 0..2) are plain vectors.
        spec["image"] = bool(
            space.dtype == np.uint8 and len(shape) in (2, 3) and np.all(space.low == 0) and np.all(space.high == 255)
        )
        if len(shape) == 3:
            # The channel axis is the short one: (84, 84, 4) and (210, 160, 3) are channels-last, (4, 84, 84) not.
            spec["channels_last"] = shape[2] < shape[0]
        return spec
    if isinstance(space, spaces.Discrete):
        return {"type": "discrete", "n": int(space.n)}
    if isinstance(space, spaces.MultiDiscrete):
        return {"type": "multi_discrete", "nvec": [int(n) for n in space.nvec.flatten()]}
    if isinstance(space, spaces.MultiBinary):
        return {"type": "multi_binary", "shape": [int(s) for s in space.shape]}
    if isinstance(space, spaces.Dict):
        keys = list(space.spaces)
        return {"type": "dict", "keys": [str(k) for k in keys],
                "spaces": [describe_observation_space(space[k], f"{where} {space}, whose key {k!r} is") for k in keys]}
    if isinstance(space, spaces.Tuple):
        return {"type": "tuple", "spaces": [
            describe_observation_space(s, f"{where} {space}, whose item {i} is") for i, s in enumerate(space)]}
    raise _unsupported(where, space, " Wrap the environment (data.wrappers) so that it returns a supported space.")


def describe_action_space(space: spaces.Space, where: str = "action space") -> dict[str, Any]:
    if isinstance(space, spaces.Discrete):
        return {"type": "discrete", "n": int(space.n)}
    if isinstance(space, spaces.Box):
        if not np.issubdtype(space.dtype, np.floating):
            raise _unsupported(where, space, " Box actions must be floating point.")
        # The bounds stay with the env's space: actions_to_env clips to them.
        return {"type": "box", "shape": [int(s) for s in space.shape]}
    if isinstance(space, spaces.MultiDiscrete):
        return {"type": "multi_discrete", "shape": [int(s) for s in space.shape],
                "nvec": [int(n) for n in space.nvec.flatten()]}
    if isinstance(space, spaces.MultiBinary):
        return {"type": "multi_binary", "shape": [int(s) for s in space.shape]}
    raise _unsupported(where, space)


def observation_tensor_shape(spec: dict[str, Any]) -> tuple[int, ...]:
    """Shape of one observation as :func:`observations_to_tensor` makes it."""
    if spec["type"] in ("dict", "tuple"):
        return (sum(leaf_size(leaf) for leaf in spec_leaves(spec)),)
    return leaf_shape(spec)


# -- converting observations and actions ------------------------------------------------------------------------
def observations_to_tensor(obs: Any, space: spaces.Space) -> Tensor:
    """A vector env's batch of observations as the one tensor the policy (and the rollout buffer) takes.

    Box: float32, except uint8 images, which stay uint8 (a quarter of the memory; the network scales them to
    [0, 1] on the learner's device). Discrete / MultiDiscrete: int64 indices from 0 (the network one-hot encodes
    them). MultiBinary: uint8. Dict / Tuple: every part flattened and packed, in key order, into one vector per
    environment: uint8 if all parts are uint8, float32 otherwise (the network unpacks it by the space's layout).
    """
    if isinstance(space, spaces.Box):
        return torch.as_tensor(obs, dtype=torch.uint8 if space.dtype == np.uint8 else torch.float32)
    if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)):
        return torch.as_tensor(np.asarray(obs, dtype=np.int64) - space.start)
    if isinstance(space, spaces.MultiBinary):
        return torch.as_tensor(obs, dtype=torch.uint8)
    if isinstance(space, (spaces.Dict, spaces.Tuple)):
        parts = [observations_to_tensor(obs[key], space[key]) for key in _keys(space)]
        dtype = torch.uint8 if all(p.dtype == torch.uint8 for p in parts) else torch.float32
        return torch.cat([p.reshape(p.shape[0], -1).to(dtype) for p in parts], dim=1)
    raise TypeError(f"no tensor conversion for observation space {space}")


def _keys(space: Union[spaces.Dict, spaces.Tuple]) -> list:
    return list(space.spaces) if isinstance(space, spaces.Dict) else list(range(len(space.spaces)))


def final_observations_to_tensor(items: Sequence[Any], space: spaces.Space) -> Tensor:
    """Per-environment final observations (``info["final_obs"][idx]``) as :func:`observations_to_tensor` makes them."""
    batch = concatenate(space, list(items), create_empty_array(space, len(items)))
    return observations_to_tensor(batch, space)


def actions_to_env(actions: Tensor, space: spaces.Space) -> np.ndarray:
    """Policy actions as the vector env takes them.

    Box actions are *clipped* to the bounds here, while the rollout keeps the sampled action and its log-prob
    (see :class:`lit_ppo.networks.DiagGaussianHead`). Discrete/MultiDiscrete indices are shifted by ``start``.
    """
    array = actions.numpy()
    if isinstance(space, spaces.Discrete):
        return array + space.start if space.start else array
    if isinstance(space, spaces.Box):
        return np.clip(array, space.low, space.high).astype(space.dtype, copy=False)
    if isinstance(space, spaces.MultiDiscrete):
        return array + space.start
    if isinstance(space, spaces.MultiBinary):
        return array.astype(space.dtype)
    raise TypeError(f"no action conversion for action space {space}")


def action_layout(space: spaces.Space) -> tuple[tuple[int, ...], torch.dtype]:
    """Shape and dtype of one action as the policy produces it (what a rollout buffer stores)."""
    head = make_head(describe_action_space(space))
    return head.action_shape, head.action_dtype

"""Building the environments that rollouts play, and describing their spaces.

``data.env_id`` is one of:

- a registered gymnasium id (``Pendulum-v1``);
- gymnasium's ``module:Id`` form (``ale_py:ALE/Breakout-v5``): the module is imported, which registers the id;
- an entry point ``module:Attribute`` (``my_pkg.envs:MyEnv``): a ``gymnasium.Env`` class, or a function returning
  one, that nobody registered; the module is imported from the config.

``data.wrappers`` is a list of gymnasium wrappers applied in order to each environment, each a class path or
``{class_path: ..., init_args: {...}}``. The spaces become typed specs once (:func:`describe_spaces`, as plain data
for checkpoints); observations and actions cross between envs and policy in :mod:`lit_ppo.spaces`.
"""

import functools
import importlib
from collections.abc import Sequence
from typing import Any, Optional, Union

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec
from gymnasium.vector import AutoresetMode

from lit_ppo.classpath import ClassPathConfig, resolve
from lit_ppo.errors import ConfigError
from lit_ppo.spaces import UnsupportedSpaceError, action_spec, observation_spec, spec_to_dict

VECTORIZATION_MODES = ("sync", "async")
WrapperConfig = ClassPathConfig


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
        class_path, wrap = resolve(config, f"data.wrappers[{index}]")
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




def describe_spaces(
    env_id: str, env_kwargs: Optional[dict[str, Any]] = None, wrappers: Optional[Sequence[WrapperConfig]] = None
) -> dict[str, Any]:
    """``{"env_id", "observation", "action"}``: the typed specs of ``env_id``'s spaces (after ``wrappers``) as
    plain data (:func:`lit_ppo.spaces.spec_to_dict`), because it is saved in checkpoint hyperparameters.

    Raises a :class:`ConfigError` for unknown ids and for spaces the policy cannot handle, before any training.
    """
    env = make_env(env_id, env_kwargs, wrappers)
    try:
        obs_space, act_space = env.observation_space, env.action_space
    finally:
        env.close()
    try:
        observation = observation_spec(obs_space, f"data.env_id: {env_id!r} has observation space")
        action = action_spec(act_space, f"data.env_id: {env_id!r} has action space")
    except UnsupportedSpaceError as err:
        raise ConfigError(str(err)) from None
    return {"env_id": env_id, "observation": spec_to_dict(observation), "action": spec_to_dict(action)}

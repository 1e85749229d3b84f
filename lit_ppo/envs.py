"""Building the vector environments that rollouts play, and checking that their spaces are supported."""

from typing import Any, Optional

import gymnasium as gym
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from lit_ppo.errors import ConfigError

SUPPORTED = "observations: Box; actions: Discrete"
VECTORIZATION_MODES = ("sync", "async")


def describe_spaces(env_id: str, env_kwargs: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """Observation shape and action description of ``env_id`` as plain data (it is saved in checkpoints).

    Raises a :class:`ConfigError` for unknown ids and for spaces the policy cannot handle, before any training.
    """
    env = make_env(env_id, env_kwargs)
    try:
        obs_space, act_space = env.observation_space, env.action_space
    finally:
        env.close()
    if not isinstance(obs_space, spaces.Box):
        raise ConfigError(
            f"data.env_id: {env_id!r} has observation space {obs_space}, which is not supported yet "
            f"(supported: {SUPPORTED}). Wrap the environment so it returns a Box, e.g. FlattenObservation."
        )
    if isinstance(act_space, spaces.Discrete):
        if act_space.start != 0:
            raise ConfigError(f"data.env_id: {env_id!r} has {act_space} with start={act_space.start}; only start=0.")
        action = {"type": "discrete", "n": int(act_space.n)}
    else:
        raise ConfigError(
            f"data.env_id: {env_id!r} has action space {act_space}, which is not supported yet "
            f"(supported: {SUPPORTED})."
        )
    return {"env_id": env_id, "observation_shape": list(obs_space.shape), "action": action}


def make_env(env_id: str, env_kwargs: Optional[dict[str, Any]] = None, **kwargs: Any) -> gym.Env:
    """``gymnasium.make`` with an error that names the id and the fix."""
    try:
        return gym.make(env_id, **(env_kwargs or {}), **kwargs)
    except gym.error.Error as err:
        raise ConfigError(
            f"data.env_id: cannot make environment {env_id!r}: {err}. "
            "Use a registered id (list them with `python -c 'import gymnasium; gymnasium.pprint_registry()'`)."
        ) from None


def make_vector_env(
    env_id: str,
    num_envs: int,
    vectorization: str = "sync",
    env_kwargs: Optional[dict[str, Any]] = None,
    **make_kwargs: Any,
) -> gym.vector.VectorEnv:
    """A vector env with same-step autoreset and episode statistics.

    Same-step autoreset hands the real final observation over in ``info["final_obs"]`` at the step that ends an
    episode, which truncation bootstrapping needs (gymnasium's default, next-step, would need a masked reset step).
    """
    if vectorization not in VECTORIZATION_MODES:
        raise ConfigError(f"data.vectorization: {vectorization!r} is not one of {VECTORIZATION_MODES}.")
    try:
        envs = gym.make_vec(
            env_id,
            num_envs=num_envs,
            vectorization_mode=vectorization,
            vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
            **(env_kwargs or {}),
            **make_kwargs,
        )
    except gym.error.Error as err:
        raise ConfigError(f"data.env_id: cannot make environment {env_id!r}: {err}") from None
    return gym.wrappers.vector.RecordEpisodeStatistics(envs)

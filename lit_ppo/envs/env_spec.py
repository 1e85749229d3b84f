"""The env spec: what one environment id, with its kwargs and wrappers, looks like to the policy, as plain data.

Made once, before training, by playing nothing: one environment (or the vector env, where only it knows its spaces)
is built, its spaces read and closed. The spec is saved in checkpoint hyperparameters, so a policy can be rebuilt
without the environment; observations and actions cross between envs and policy in :mod:`lit_ppo.envs.spaces`.
"""

from collections.abc import Sequence
from typing import Any, Optional

import gymnasium as gym

from lit_ppo.envs.make import Vectorization, WrapperConfig, make_env, make_vector_env
from lit_ppo.envs.spaces import UnsupportedSpaceError, action_spec, observation_spec, spec_to_dict
from lit_ppo.errors import ConfigError


def env_spaces(
    env_id: str, env_kwargs: Optional[dict[str, Any]] = None, wrappers: Optional[Sequence[WrapperConfig]] = None,
    vectorization: Vectorization = "sync", num_envs: int = 1,
) -> tuple[gym.Space, gym.Space]:
    """One environment's observation and action spaces: from one env for sync/async, else from the vector env
    itself (a user's factory or EnvPool need not have a gymnasium.make id)."""
    return _spaces_and_agents(env_id, env_kwargs, wrappers, vectorization, num_envs)[:2]


def _spaces_and_agents(
    env_id: str, env_kwargs: Optional[dict[str, Any]], wrappers: Optional[Sequence[WrapperConfig]],
    vectorization: Vectorization, num_envs: int,
) -> tuple[gym.Space, gym.Space, dict[str, Any]]:
    """:func:`env_spaces`, and what a multi-agent vector env adds to the env spec (:mod:`lit_ppo.envs.multiagent`):
    the agents its rows repeat, and how many leading inputs are the agent's own where a global state follows."""
    if vectorization in ("sync", "async"):
        env = make_env(env_id, env_kwargs, wrappers)
        try:
            return env.observation_space, env.action_space, {}
        finally:
            env.close()
    envs = make_vector_env(env_id, num_envs, vectorization, env_kwargs, wrappers)
    try:
        base = envs.unwrapped
        extra = {key: value for key, value in (("agents", list(getattr(base, "agents", None) or [])),
                                               ("actor_inputs", getattr(base, "local_size", None)),
                                               ("outcomes", getattr(base, "outcomes", None)),
                                               ("groups", getattr(base, "group_spec", None))) if value}
        return envs.single_observation_space, envs.single_action_space, extra
    finally:
        envs.close()


def describe_spaces(
    env_id: str, env_kwargs: Optional[dict[str, Any]] = None, wrappers: Optional[Sequence[WrapperConfig]] = None,
    vectorization: Vectorization = "sync", num_envs: int = 1,
) -> dict[str, Any]:
    """``{"env_id", "observation", "action"}`` (and ``"agents"``, ``"actor_inputs"``, ``"groups"`` for a multi-agent
    vector env, ``"outcomes"`` for a game whose returns are win/draw/loss): the typed specs of ``env_id``'s spaces
    (after ``wrappers``) as plain data (:func:`lit_ppo.envs.spaces.spec_to_dict`), because it is saved in checkpoint hyperparameters.

    Raises a :class:`ConfigError` for unknown ids and for spaces the policy cannot handle, before any training.
    """
    obs_space, act_space, extra = _spaces_and_agents(env_id, env_kwargs, wrappers, vectorization, num_envs)
    try:
        observation = observation_spec(obs_space, f"data.env_id: {env_id!r} has observation space")
        action = action_spec(act_space, f"data.env_id: {env_id!r} has action space")
    except UnsupportedSpaceError as err:
        raise ConfigError(str(err)) from None
    # several agents: the names the rows repeat (per-agent metrics), the actor's share of the inputs (MAPPO)
    return {"env_id": env_id, "observation": spec_to_dict(observation), "action": spec_to_dict(action), **extra}

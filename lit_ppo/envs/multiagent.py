"""Several agents as rows of one vector env: a PettingZoo ``ParallelEnv`` for ``data.vectorization``.

Independent PPO with parameters shared across agents (IPPO): ``data.num_envs`` rows are ``num_envs / agents``
copies of the parallel env times its agents, row ``copy * agents + i`` being agent ``i`` of that copy. Each row is
an environment to the rest of lit_ppo: its own observation, action, reward, termination and truncation, so the
collector, GAE, the loss, the overlap, DDP and checkpoints take agents unchanged, and the training and evaluation
returns are per agent. ``agent_id: true`` appends a one-hot of the agent's index to its observation, so that one
network can act differently per agent; ``global_state: true`` appends the environment's global state, which only
the critic reads (MAPPO's centralized critic: ``env_spec["actor_inputs"]``).

Used from a config as ``data.vectorization: {class_path: lit_ppo.envs.multiagent.parallel_rows, init_args: {env:
mpe2.simple_spread_v3, env_kwargs: {N: 3}}}`` (``docs/multiagent.md``). A copy resets when its episode ends, in the
same step (gymnasium's same-step autoreset: a truncated agent's final observation is in ``info["final_obs"]``).
An agent whose episode ends before its copy's leaves a row that is inactive until the copy resets:
``info["active"]`` says so and the collector gives those steps weight 0 in every loss term and in the statistics;
GAE's trace is cut at the agent's end, as at any episode end. Episode statistics are the rows' own (one episode per
agent, written in ``info["episode"]`` here rather than by gymnasium's wrapper, which would count an inactive row's
steps); a copy's episode, its agents' returns summed, in ``info["team_episode"]`` on the copy's first row.

``groups`` gives each group of agents its own actor and critic (:mod:`lit_ppo.envs.agent_groups`): agents of
different spaces train this way, and agents of one space too when they should not share parameters. Two-player
turn-based (AEC) games against an opponent: :mod:`lit_ppo.envs.turn_based`.
"""

import importlib
from typing import Any, Optional

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from lit_ppo.envs.agent_groups import AgentGroups, GroupsConfig, agent_groups
from lit_ppo.errors import ConfigError


def make_from_module(env: str, env_kwargs: Optional[dict[str, Any]], default: str, kind: str):
    """What ``module`` (its function ``default``) or ``module:function`` makes with ``env_kwargs``."""
    module_name, _, name = env.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ConfigError(f"data.vectorization.env: cannot import {module_name!r} ({err}); install the package that "
                          "provides it (PettingZoo's environments: pip install 'lit_ppo[multiagent]').") from None
    factory = getattr(module, name or default, None)
    if factory is None:
        raise ConfigError(f"data.vectorization.env: {module_name!r} has no {name or default!r}; name a function "
                          f"returning a PettingZoo {kind} as 'module:function'.")
    return factory(**(env_kwargs or {}))


def load_parallel_env(env: str, env_kwargs: Optional[dict[str, Any]] = None):
    """A PettingZoo ``ParallelEnv`` from ``module`` (its ``parallel_env``, as PettingZoo's own modules have, e.g.
    ``mpe2.simple_spread_v3``) or ``module:factory``."""
    made = make_from_module(env, env_kwargs, "parallel_env", "ParallelEnv")
    from pettingzoo import AECEnv, ParallelEnv

    if isinstance(made, AECEnv):
        made.close()
        raise ConfigError(f"data.vectorization.env: {env!r} is a turn-based (AEC) environment; this adapter needs the "
                          "parallel API: give its parallel_env, or pettingzoo.utils.conversions.aec_to_parallel of it; "
                          "a two-player game against an opponent goes to lit_ppo.envs.turn_based.against_opponent.")
    if not isinstance(made, ParallelEnv):
        raise ConfigError(f"data.vectorization.env: {env!r} made a {type(made).__name__}, not a PettingZoo ParallelEnv.")
    return made


class ParallelEnvRows(gym.vector.VectorEnv):
    """``copies`` PettingZoo parallel envs as one vector env of ``copies * agents`` rows (see the module)."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "records_episode_statistics": True}

    def __init__(self, copies: int, env: str, env_kwargs: Optional[dict[str, Any]] = None, agent_id: bool = False,
                 global_state: bool = False, groups: Optional[GroupsConfig] = None):
        self.envs = [load_parallel_env(env, env_kwargs) for _ in range(copies)]
        first = self.envs[0]
        self.agents = list(first.possible_agents)
        self.name, self.agent_id, self.global_state = env, agent_id, global_state
        spaces = {a: (first.observation_space(a), first.action_space(a)) for a in self.agents}
        self.groups: Optional[AgentGroups] = None
        parts: list[gym.spaces.Space] = []
        if groups is not None:
            try:
                self.groups = agent_groups(groups, self.agents, spaces, env)
            except ConfigError:
                self.close()
                raise
            self.group_hots = self.groups.one_hots
            parts.append(gym.spaces.Box(0, 1, (len(self.groups.names),), np.float32))  # the network's group
            obs_space, self.single_action_space = self.groups.observation_space, self.groups.action_space
        else:
            odd = [a for a, s in spaces.items() if s != spaces[self.agents[0]]]
            if odd:
                self.close()
                raise ConfigError(f"data.vectorization: the agents of {env!r} do not share one observation and action "
                                  f"space ({self.agents[0]}: {spaces[self.agents[0]]}; {odd[0]}: {spaces[odd[0]]}), "
                                  "which one shared network needs; give each group of agents its own network with "
                                  "data.vectorization.groups: prefix (or {group: [agent, ...]}).")
            obs_space, self.single_action_space = spaces[self.agents[0]]
        parts.append(obs_space)
        if agent_id:
            parts.append(gym.spaces.Box(0, 1, (len(self.agents),), np.float32))
        self.local_size = None  # global_state: how many leading inputs are the agent's own (the actor's)
        if global_state:
            self.local_size = sum(int(np.prod(part.shape)) for part in parts)
            parts.append(self._state_space(first, [spaces[a][0] for a in self.agents]))
        if len(parts) > 1:
            key = "agent_id" if agent_id else "global_state"
            if not all(isinstance(part, gym.spaces.Box) and len(part.shape) == 1 for part in parts):
                self.close()
                raise ConfigError(f"data.vectorization.{key}: needs flat Box observations to append to; {env!r} "
                                  f"observes {obs_space}.")
            obs_space = gym.spaces.Box(np.concatenate([p.low for p in parts]).astype(np.float32),
                                       np.concatenate([p.high for p in parts]).astype(np.float32), dtype=np.float32)
        self.single_observation_space = obs_space
        self.num_envs = copies * len(self.agents)
        self.observation_space = batch_space(obs_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    @property
    def group_spec(self) -> Optional[dict[str, Any]]:
        """The groups as plain data for the env spec (the network reads it), or None: one network for all."""
        return None if self.groups is None else self.groups.spec

    def _state_space(self, env, observations: list[gym.spaces.Space]) -> gym.spaces.Space:
        """The global state the critic reads: the env's ``state()`` where it has one, else every agent's
        observation, concatenated (MAPPO's fallback)."""
        space = getattr(env, "state_space", None)
        if isinstance(space, gym.spaces.Box):
            return gym.spaces.Box(space.low.reshape(-1), space.high.reshape(-1), dtype=np.float32)
        return gym.spaces.Box(np.concatenate([np.reshape(o.low, -1) for o in observations]),
                              np.concatenate([np.reshape(o.high, -1) for o in observations]), dtype=np.float32)

    def _refresh_copy(self, copy: int) -> None:
        """The copy's rows from its agents' latest observations (an agent that left keeps its last)."""
        n, base = len(self.agents), copy * len(self.agents)
        raw = self.raw[base:base + n]
        shared = None
        if self.global_state:
            env = self.envs[copy]
            shared = (np.asarray(env.state(), np.float32).reshape(-1) if getattr(env, "state_space", None) is not None
                      else np.concatenate([np.asarray(o, np.float32).reshape(-1) for o in raw]))
        for i in range(n):
            parts = [np.asarray(raw[i])] if self.groups is None else [self.group_hots[i],
                                                                       self.groups.own_part(raw[i])]
            if self.agent_id:
                parts.append(np.eye(n, dtype=np.float32)[i])
            if shared is not None:
                parts.append(shared)
            self.obs[base + i] = parts[0] if len(parts) == 1 else np.concatenate(
                [np.asarray(part, np.float32) for part in parts])

    def _reset_copy(self, copy: int, seed: Optional[int] = None, options: Optional[dict] = None) -> None:
        observations, _ = self.envs[copy].reset(seed=seed, options=options)
        n, base = len(self.agents), copy * len(self.agents)
        for i, a in enumerate(self.agents):
            self.raw[base + i] = observations[a]
        self._refresh_copy(copy)
        self.active[base:base + n] = True
        self.returns[base:base + n], self.lengths[base:base + n] = 0.0, 0

    def _info(self, **extra: Any) -> dict[str, Any]:
        return {"active": self.active.copy(), **extra}

    def reset(self, *, seed: Optional[Any] = None, options: Optional[dict] = None):
        seeds = seed if isinstance(seed, (list, tuple)) else [None if seed is None else seed + i
                                                             for i in range(len(self.envs))]
        self.obs, self.raw = [None] * self.num_envs, [None] * self.num_envs
        self.active = np.ones(self.num_envs, bool)
        self.returns, self.lengths = np.zeros(self.num_envs), np.zeros(self.num_envs, np.int64)
        for copy, s in enumerate(seeds):
            self._reset_copy(copy, s, options)
        return np.stack(self.obs), self._info()

    def step(self, actions):
        """Every live agent acts. A row whose agent finished while its copy goes on is inactive until the copy
        resets (``info["active"]``; the rollout gives its steps weight 0): its action is ignored, its observation
        stays the agent's last, its reward is 0, and it is ``terminated`` with its copy's last step, so that a
        recurrent state and the episode statistics start over there."""
        n = len(self.agents)
        rewards = np.zeros(self.num_envs, np.float32)
        terminated, truncated = np.zeros(self.num_envs, bool), np.zeros(self.num_envs, bool)
        final_obs, has_final = np.full(self.num_envs, None, dtype=object), np.zeros(self.num_envs, bool)
        ended = np.zeros(self.num_envs, bool)  # rows whose agent's episode ended at this step
        episode_r, episode_l = np.zeros(self.num_envs), np.zeros(self.num_envs, np.int64)
        team_r, team_ended = np.zeros(self.num_envs), np.zeros(self.num_envs, bool)  # on a copy's first row
        for copy, env in enumerate(self.envs):
            base = copy * n
            live = [i for i, a in enumerate(self.agents) if a in env.agents]
            observations, reward, term, trunc, _ = env.step({self.agents[i]: actions[base + i] for i in live})
            for i in live:
                a, row = self.agents[i], base + i
                rewards[row], terminated[row], truncated[row] = reward[a], term[a], trunc[a]
                self.raw[row] = observations[a]
                self.returns[row] += reward[a]
                self.lengths[row] += 1
                if term[a] or trunc[a]:
                    ended[row], self.active[row] = True, False
                    episode_r[row], episode_l[row] = self.returns[row], self.lengths[row]
            self._refresh_copy(copy)
            for row in np.flatnonzero(ended[base:base + n]) + base:
                final_obs[row], has_final[row] = self.obs[row], True
            if not env.agents:  # the copy's episode is over: the rows that left earlier end with it
                terminated[base:base + n] |= ~ended[base:base + n]
                team_r[base], team_ended[base] = self.returns[base:base + n].sum(), True
                self._reset_copy(copy)
        info = self._info()
        if has_final.any():
            info.update(final_obs=final_obs, _final_obs=has_final)
        if ended.any():  # as gymnasium's RecordEpisodeStatistics writes them, one episode per agent
            info.update(episode={"r": episode_r, "l": episode_l, "t": np.zeros(self.num_envs)}, _episode=ended)
        if team_ended.any():  # the team's return: the copy's agents' returns summed, once per copy
            info.update(team_episode={"r": team_r}, _team_episode=team_ended)
        return np.stack(self.obs), rewards, terminated, truncated, info

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()


def parallel_rows(num_envs: int, env: str, env_kwargs: Optional[dict[str, Any]] = None,
                  agent_id: bool = False, global_state: bool = False,
                  groups: Optional[GroupsConfig] = None) -> ParallelEnvRows:
    """``data.vectorization``'s factory: ``num_envs`` rows (copies x agents) of the PettingZoo parallel env ``env``
    (``module`` or ``module:factory``) made with ``env_kwargs``; ``agent_id``: a one-hot of the agent in its
    observation; ``global_state``: the env's global state (its ``state()``, else every agent's observation) appended
    after them, which only the critic reads (MAPPO; ``env_spec["actor_inputs"]`` says how many inputs the actor
    takes); ``groups``: one actor and critic per group of agents, ``prefix`` (by name) or ``{group: [agent, ...]}``
    (:mod:`lit_ppo.envs.agent_groups`). ``num_envs`` must be a multiple of the number of agents."""
    probe = load_parallel_env(env, env_kwargs)
    agents = len(probe.possible_agents)
    probe.close()
    if num_envs % agents:
        raise ConfigError(f"data.num_envs: {env!r} has {agents} agents, each a row of the vector env, so num_envs must "
                          f"be a multiple of {agents} (copies x agents); got {num_envs}. The same holds for "
                          "data.eval_episodes, whose environments are rows too.")
    return ParallelEnvRows(num_envs // agents, env, env_kwargs, agent_id, global_state, groups)

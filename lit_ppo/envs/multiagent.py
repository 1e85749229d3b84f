"""Several agents as rows of one vector env: a PettingZoo ``ParallelEnv`` for ``data.vectorization``.

Independent PPO with parameters shared across agents (IPPO): ``data.num_envs`` rows are ``num_envs / agents``
copies of the parallel env times its agents, row ``copy * agents + i`` being agent ``i`` of that copy. Each row is
an environment to the rest of lit_ppo: its own observation, action, reward, termination and truncation, so the
collector, GAE, the loss, the overlap, DDP and checkpoints take agents unchanged, and the training and evaluation
returns are per agent. ``agent_id: true`` appends a one-hot of the agent's index to its observation, so that one
network can act differently per agent.

Used from a config as ``data.vectorization: {class_path: lit_ppo.envs.multiagent.parallel_rows, init_args: {env:
mpe2.simple_spread_v3, env_kwargs: {N: 3}}}`` (``docs/multiagent.md``). A copy resets when its episode ends, in the
same step (gymnasium's same-step autoreset: a truncated agent's final observation is in ``info["final_obs"]``).
An agent whose episode ends before its copy's leaves a row that is inactive until the copy resets:
``info["active"]`` says so and the collector gives those steps weight 0 in every loss term and in the statistics;
GAE's trace is cut at the agent's end, as at any episode end. Episode statistics are the rows' own (one episode per
agent, written in ``info["episode"]`` here rather than by gymnasium's wrapper, which would count an inactive row's
steps).

Not yet: agents of different spaces (one network per group), a centralized critic (MAPPO), turn-based (AEC) games.
Each is refused by name rather than trained wrongly.
"""

import importlib
from typing import Any, Optional

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from lit_ppo.errors import ConfigError


def _make(env: str, env_kwargs: Optional[dict[str, Any]], default: str, kind: str):
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
    made = _make(env, env_kwargs, "parallel_env", "ParallelEnv")
    from pettingzoo import AECEnv, ParallelEnv

    if isinstance(made, AECEnv):
        made.close()
        raise ConfigError(f"data.vectorization.env: {env!r} is a turn-based (AEC) environment; this adapter needs the "
                          "parallel API: give its parallel_env, or pettingzoo.utils.conversions.aec_to_parallel of it; "
                          "a two-player game against an opponent goes to lit_ppo.envs.multiagent.turn_based.")
    if not isinstance(made, ParallelEnv):
        raise ConfigError(f"data.vectorization.env: {env!r} made a {type(made).__name__}, not a PettingZoo ParallelEnv.")
    return made


class ParallelEnvRows(gym.vector.VectorEnv):
    """``copies`` PettingZoo parallel envs as one vector env of ``copies * agents`` rows (see the module)."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "records_episode_statistics": True}

    def __init__(self, copies: int, env: str, env_kwargs: Optional[dict[str, Any]] = None, agent_id: bool = False,
                 global_state: bool = False):
        self.envs = [load_parallel_env(env, env_kwargs) for _ in range(copies)]
        first = self.envs[0]
        self.agents = list(first.possible_agents)
        self.name, self.agent_id, self.global_state = env, agent_id, global_state
        spaces = {a: (first.observation_space(a), first.action_space(a)) for a in self.agents}
        odd = [a for a, s in spaces.items() if s != spaces[self.agents[0]]]
        if odd:
            self.close()
            raise ConfigError(f"data.vectorization: the agents of {env!r} do not share one observation and action "
                              f"space ({self.agents[0]}: {spaces[self.agents[0]]}; {odd[0]}: {spaces[odd[0]]}), which "
                              "one shared network needs; one network per agent group is not available yet.")
        obs_space, self.single_action_space = spaces[self.agents[0]]
        parts = [obs_space]
        if agent_id:
            parts.append(gym.spaces.Box(0, 1, (len(self.agents),), np.float32))
        self.local_size = None  # global_state: how many leading inputs are the agent's own (the actor's)
        if global_state:
            self.local_size = sum(int(np.prod(part.shape)) for part in parts)
            parts.append(self._state_space(first, obs_space))
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

    def _state_space(self, env, obs_space: gym.spaces.Space) -> gym.spaces.Space:
        """The global state the critic reads: the env's ``state()`` where it has one, else every agent's
        observation, concatenated (MAPPO's fallback)."""
        space = getattr(env, "state_space", None)
        if isinstance(space, gym.spaces.Box):
            return gym.spaces.Box(space.low.reshape(-1), space.high.reshape(-1), dtype=np.float32)
        n = len(self.agents)
        return gym.spaces.Box(np.tile(obs_space.low.reshape(-1), n), np.tile(obs_space.high.reshape(-1), n),
                              dtype=np.float32)

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
            parts = [np.asarray(raw[i])]
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
                self._reset_copy(copy)
        info = self._info()
        if has_final.any():
            info.update(final_obs=final_obs, _final_obs=has_final)
        if ended.any():  # as gymnasium's RecordEpisodeStatistics writes them, one episode per agent
            info.update(episode={"r": episode_r, "l": episode_l, "t": np.zeros(self.num_envs)}, _episode=ended)
        return np.stack(self.obs), rewards, terminated, truncated, info

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()


def parallel_rows(num_envs: int, env: str, env_kwargs: Optional[dict[str, Any]] = None,
                  agent_id: bool = False, global_state: bool = False) -> ParallelEnvRows:
    """``data.vectorization``'s factory: ``num_envs`` rows (copies x agents) of the PettingZoo parallel env ``env``
    (``module`` or ``module:factory``) made with ``env_kwargs``; ``agent_id``: a one-hot of the agent in its
    observation; ``global_state``: the env's global state (its ``state()``, else every agent's observation) appended
    after them, which only the critic reads (MAPPO; ``env_spec["actor_inputs"]`` says how many inputs the actor
    takes). ``num_envs`` must be a multiple of the number of agents."""
    probe = load_parallel_env(env, env_kwargs)
    agents = len(probe.possible_agents)
    probe.close()
    if num_envs % agents:
        raise ConfigError(f"data.num_envs: {env!r} has {agents} agents, each a row of the vector env, so num_envs must "
                          f"be a multiple of {agents} (copies x agents); got {num_envs}. The same holds for "
                          "data.eval_episodes, whose environments are rows too.")
    return ParallelEnvRows(num_envs // agents, env, env_kwargs, agent_id, global_state)


def _random_opponent(rng: np.random.Generator, mask: np.ndarray, board: np.ndarray) -> int:
    return int(rng.choice(np.flatnonzero(mask)))


OPPONENTS = {"random": _random_opponent}


class TurnBasedVsOpponent(gym.vector.VectorEnv):
    """``num_envs`` two-player turn-based games (PettingZoo AEC, e.g. ``pettingzoo.classic.connect_four_v3``), each a
    row: the learner plays one seat, alternating seats from game to game (copy ``i`` starts in seat ``i % 2``, so
    that an even number of evaluation games covers both seats equally), and an opponent inside the environment
    plays the other. The learner's observation is the game's ``observation`` (flattened), its valid moves are in
    ``info["action_mask"]`` (``data.action_masks: info``), its reward is its own (+1 win, -1 loss, 0 draw in the
    classic games). A game resets in the step it ends (same-step autoreset).

    Opponents: ``random`` (uniform over the valid moves, seeded per game copy). An opponent pool of the learner's
    own snapshots is not available yet."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, num_envs: int, env: str, env_kwargs: Optional[dict[str, Any]] = None,
                 opponent: str = "random") -> None:
        if opponent not in OPPONENTS:
            raise ConfigError(f"data.vectorization.opponent: must be one of {sorted(OPPONENTS)}, got {opponent!r}.")
        self.envs = [load_turn_based_env(env, env_kwargs) for _ in range(num_envs)]
        first = self.envs[0]
        self.seats = list(first.possible_agents)
        if len(self.seats) != 2:
            self.close()
            raise ConfigError(f"data.vectorization.env: {env!r} has {len(self.seats)} players; this adapter plays "
                              "two-player games.")
        space = first.observation_space(self.seats[0])
        if not (isinstance(space, gym.spaces.Dict) and {"observation", "action_mask"} <= set(space.spaces)):
            self.close()
            raise ConfigError(f"data.vectorization.env: {env!r} observes {space}; this adapter needs PettingZoo's "
                              "classic form {observation, action_mask}.")
        board = space["observation"]
        self.single_observation_space = gym.spaces.Box(0.0, 1.0, (int(np.prod(board.shape)),), np.float32) \
            if np.issubdtype(board.dtype, np.integer) and board.high.max() <= 1 else \
            gym.spaces.Box(-np.inf, np.inf, (int(np.prod(board.shape)),), np.float32)
        self.single_action_space = first.action_space(self.seats[0])
        self.num_envs = num_envs
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.opponent = OPPONENTS[opponent]
        self.games = np.zeros(num_envs, np.int64)  # games played per copy: the learner's seat alternates with it

    def _learner(self, i: int) -> str:
        return self.seats[self.games[i] % 2]

    def _observe(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        seen = self.envs[i].observe(self._learner(i))
        return np.asarray(seen["observation"], np.float32).reshape(-1), np.asarray(seen["action_mask"], bool)

    def _play_opponent(self, i: int) -> float:
        """The opponent's moves until it is the learner's turn or the game is over; the learner's reward meanwhile."""
        env, learner, reward = self.envs[i], self._learner(i), 0.0
        while env.agents and env.agent_selection != learner and learner in env.agents:
            if env.terminations[env.agent_selection] or env.truncations[env.agent_selection]:
                env.step(None)
                continue
            seen = env.observe(env.agent_selection)
            env.step(self.opponent(self.rngs[i], np.asarray(seen["action_mask"], bool), seen["observation"]))
            reward += env.rewards.get(learner, 0.0)
        return reward

    def _over(self, i: int) -> tuple[bool, bool]:
        env, learner = self.envs[i], self._learner(i)
        return bool(env.terminations.get(learner, True)), bool(env.truncations.get(learner, False))

    def _start(self, i: int, seed: Optional[int] = None) -> None:
        self.envs[i].reset(seed=seed)
        self._play_opponent(i)  # the opponent opens where the learner has the second seat

    def reset(self, *, seed: Optional[Any] = None, options: Optional[dict] = None):
        seeds = seed if isinstance(seed, (list, tuple)) else [None if seed is None else seed + i
                                                             for i in range(self.num_envs)]
        self.rngs = [np.random.default_rng(None if s is None else s + 7919) for s in seeds]
        self.games[:] = np.arange(self.num_envs)  # neighbouring copies start in different seats (evaluation: both)
        for i, s in enumerate(seeds):
            self._start(i, s)
        observed = [self._observe(i) for i in range(self.num_envs)]
        return np.stack([o for o, _ in observed]), {"action_mask": np.stack([m for _, m in observed])}

    def step(self, actions):
        rewards = np.zeros(self.num_envs, np.float32)
        terminated, truncated = np.zeros(self.num_envs, bool), np.zeros(self.num_envs, bool)
        final_obs, has_final = np.full(self.num_envs, None, dtype=object), np.zeros(self.num_envs, bool)
        observations, masks = [], []
        for i, env in enumerate(self.envs):
            learner = self._learner(i)
            env.step(int(actions[i]))
            rewards[i] = env.rewards.get(learner, 0.0)
            if not any(self._over(i)):
                rewards[i] += self._play_opponent(i)
            terminated[i], truncated[i] = self._over(i)
            if terminated[i] or truncated[i]:
                final_obs[i], has_final[i] = self._observe(i)[0], True
                self.games[i] += 1
                self._start(i)
            obs, mask = self._observe(i)
            observations.append(obs)
            masks.append(mask)
        info: dict[str, Any] = {"action_mask": np.stack(masks)}
        if has_final.any():
            info.update(final_obs=final_obs, _final_obs=has_final)
        return np.stack(observations), rewards, terminated, truncated, info

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()


def load_turn_based_env(env: str, env_kwargs: Optional[dict[str, Any]] = None):
    """A PettingZoo AEC environment from ``module`` (its ``env``, e.g. ``pettingzoo.classic.connect_four_v3``) or
    ``module:factory``."""
    made = _make(env, env_kwargs, "env", "AECEnv")
    from pettingzoo import AECEnv

    if not isinstance(made, AECEnv):
        raise ConfigError(f"data.vectorization.env: {env!r} made a {type(made).__name__}, not a turn-based PettingZoo "
                          "AECEnv; a parallel env goes to lit_ppo.envs.multiagent.parallel_rows.")
    return made


def turn_based(num_envs: int, env: str, env_kwargs: Optional[dict[str, Any]] = None,
               opponent: str = "random") -> TurnBasedVsOpponent:
    """``data.vectorization``'s factory for two-player turn-based games against an opponent inside the environment
    (:class:`TurnBasedVsOpponent`); use with ``data.action_masks: info``."""
    return TurnBasedVsOpponent(num_envs, env, env_kwargs, opponent)

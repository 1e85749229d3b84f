"""Two-player turn-based games (PettingZoo AEC, e.g. ``pettingzoo.classic.connect_four_v3``) for ``data.vectorization``:
the learner plays one seat of each game and an opponent inside the environment the other (``docs/multiagent.md``).

Used from a config as ``data.vectorization: {class_path: lit_ppo.envs.turn_based.against_opponent, init_args: {env:
pettingzoo.classic.connect_four_v3, opponent: random}}`` with ``data.action_masks: info``.
"""

from typing import Any, Optional

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from lit_ppo.envs.multiagent import make_from_module
from lit_ppo.errors import ConfigError


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
    made = make_from_module(env, env_kwargs, "env", "AECEnv")
    from pettingzoo import AECEnv

    if not isinstance(made, AECEnv):
        raise ConfigError(f"data.vectorization.env: {env!r} made a {type(made).__name__}, not a turn-based PettingZoo "
                          "AECEnv; a parallel env goes to lit_ppo.envs.multiagent.parallel_rows.")
    return made


def against_opponent(num_envs: int, env: str, env_kwargs: Optional[dict[str, Any]] = None,
                     opponent: str = "random") -> TurnBasedVsOpponent:
    """``data.vectorization``'s factory for two-player turn-based games against an opponent inside the environment
    (:class:`TurnBasedVsOpponent`); use with ``data.action_masks: info``."""
    return TurnBasedVsOpponent(num_envs, env, env_kwargs, opponent)

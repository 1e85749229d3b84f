"""Two-player turn-based games (PettingZoo AEC, e.g. ``pettingzoo.classic.connect_four_v3``) for ``data.vectorization``:
the learner plays one seat of each game and an opponent inside the environment the other (``docs/multiagent.md``).

Used from a config as ``data.vectorization: {class_path: lit_ppo.envs.turn_based.against_opponent, init_args: {env:
pettingzoo.classic.connect_four_v3, opponent: random}}`` with ``data.action_masks: info``; ``self_play: {}`` adds an
opponent pool of the learner's own snapshots (:mod:`lit_ppo.envs.opponents`).
"""

from collections.abc import Sequence
from typing import Any, Optional, Union

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from lit_ppo.envs.multiagent import make_from_module
from lit_ppo.envs.opponents import Opponent, fixed_opponent, snapshot_pool
from lit_ppo.errors import ConfigError


class TurnBasedVsOpponent(gym.vector.VectorEnv):
    """``num_envs`` two-player turn-based games (PettingZoo AEC, e.g. ``pettingzoo.classic.connect_four_v3``), each a
    row: the learner plays one seat, alternating seats from game to game (copy ``i`` starts in seat ``i % 2``, so
    that an even number of evaluation games covers both seats equally), and an opponent inside the environment
    plays the other. The learner's observation is the game's ``observation`` (flattened), its valid moves are in
    ``info["action_mask"]`` (``data.action_masks: info``), its reward is its own (+1 win, -1 loss, 0 draw in the
    classic games). A game resets in the step it ends (same-step autoreset).

    ``opponent``: ``random`` (uniform over the valid moves) or ``win_or_block`` (connect four's scripted player), or
    a callable ``(rng, action_mask, board) -> move`` (:mod:`lit_ppo.envs.opponents`), or a list of them: each game's
    fixed opponent is then drawn uniformly from the list. Each game copy draws its randomness from a generator of its
    own seed. ``self_play`` (``{pool_size, snapshot_every, fixed_share}``):
    every ``snapshot_every`` rollouts the policy the learner acts with joins a pool of its newest ``pool_size``
    snapshots, and each game's opponent is drawn from it (:class:`lit_ppo.envs.opponents.SnapshotPool`: the fixed
    opponent with probability ``fixed_share``, else a snapshot uniformly). The pool is part of the environment,
    so it is in the checkpoint and a resumed run plays the same opponents. An environment that never sees the
    learner, as the in-fit evaluation's, has an empty pool and plays the fixed opponent."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}
    outcomes = True  # an episode's return is its outcome for the learner: +1 a win, 0 a draw, -1 a loss

    def __init__(self, num_envs: int, env: str, env_kwargs: Optional[dict[str, Any]] = None,
                 opponent: Union[str, Opponent, Sequence[Union[str, Opponent]]] = "random",
                 self_play: Optional[dict[str, Any]] = None) -> None:
        listed = list(opponent) if isinstance(opponent, (list, tuple)) else [opponent]
        if not listed:
            raise ConfigError("data.vectorization.opponent: an empty list; name an opponent (random, win_or_block) "
                              "or several, each game's drawn uniformly from them.")
        self.fixed = [o if callable(o) else fixed_opponent(o) for o in listed]
        self.pool = snapshot_pool(self_play)
        self.env, self.env_kwargs = env, env_kwargs
        self.tables = [load_turn_based_env(env, env_kwargs) for _ in range(num_envs)]  # a game copy each
        self.moves: list[list[Optional[int]]] = [[] for _ in range(num_envs)]  # each copy's game so far
        self.reset_seeds: list[Optional[int]] = [None] * num_envs
        first = self.tables[0]
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
        self.opponents: list[Opponent] = [self.fixed[0]] * num_envs  # each copy's opponent in its current game
        self.games = np.zeros(num_envs, np.int64)  # games played per copy: the learner's seat alternates with it

    def _learner(self, i: int) -> str:
        return self.seats[self.games[i] % 2]

    def _observe(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        seen = self.tables[i].observe(self._learner(i))
        return np.asarray(seen["observation"], np.float32).reshape(-1), np.asarray(seen["action_mask"], bool)

    def _play_opponent(self, i: int) -> float:
        """The opponent's moves until it is the learner's turn or the game is over; the learner's reward meanwhile."""
        env, learner, reward = self.tables[i], self._learner(i), 0.0
        while env.agents and env.agent_selection != learner and learner in env.agents:
            if env.terminations[env.agent_selection] or env.truncations[env.agent_selection]:
                self._move(i, None)
                continue
            seen = env.observe(env.agent_selection)
            self._move(i, self.opponents[i](self.rngs[i], np.asarray(seen["action_mask"], bool), seen["observation"]))
            reward += env.rewards.get(learner, 0.0)
        return reward

    def _move(self, i: int, move: Optional[int]) -> None:
        self.tables[i].step(move)
        self.moves[i].append(move)

    def _over(self, i: int) -> tuple[bool, bool]:
        env, learner = self.tables[i], self._learner(i)
        return bool(env.terminations.get(learner, True)), bool(env.truncations.get(learner, False))

    def _start(self, i: int, seed: Optional[int] = None) -> None:
        self.tables[i].reset(seed=seed)
        self.moves[i], self.reset_seeds[i] = [], seed
        # one fixed opponent: no draw, so that a game's randomness is what it was before lists existed
        fixed = self.fixed[0] if len(self.fixed) == 1 else self.fixed[int(self.rngs[i].integers(len(self.fixed)))]
        self.opponents[i] = self.pool.draw(self.rngs[i], fixed) if self.pool else fixed
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
        for i, env in enumerate(self.tables):
            learner = self._learner(i)
            self._move(i, int(actions[i]))
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

    def __getstate__(self) -> dict[str, Any]:
        # PettingZoo's classic games pickle as their constructor arguments (gymnasium's EzPickle), not the game in
        # progress: a game copy pickles as its moves, replayed when unpickled (the classic games are deterministic).
        return {k: v for k, v in vars(self).items() if k != "tables"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state)
        self.tables = [load_turn_based_env(self.env, self.env_kwargs) for _ in range(self.num_envs)]
        for table, seed, moves in zip(self.tables, self.reset_seeds, self.moves):
            table.reset(seed=seed)
            for move in moves:
                table.step(move)

    def see_learner(self, policy: Any, rollout: int) -> None:
        """Called by the collector before each rollout with the policy it acts with: self-play's snapshots."""
        if self.pool is not None:
            self.pool.see(policy, rollout)

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.tables:
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
                     opponent: Union[str, list[str]] = "random",
                     self_play: Optional[dict[str, Any]] = None) -> TurnBasedVsOpponent:
    """``data.vectorization``'s factory for two-player turn-based games against an opponent inside the environment
    (:class:`TurnBasedVsOpponent`: ``opponent`` random or win_or_block, or a list of them, one drawn per game;
    ``self_play`` a pool of the learner's snapshots); use with ``data.action_masks: info``."""
    return TurnBasedVsOpponent(num_envs, env, env_kwargs, opponent, self_play)

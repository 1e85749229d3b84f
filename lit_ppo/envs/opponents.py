"""The opponents a two-player game (:mod:`lit_ppo.envs.turn_based`) plays the learner against: a random player, a
scripted connect-four player, and the learner's own past snapshots (self-play).

An opponent is a callable ``(rng, action_mask, board) -> move``: ``rng`` is the game copy's
``numpy.random.Generator`` (all its randomness, so that a game is reproducible and pickles with the environment),
``board`` the game's observation from the opponent's own seat (PettingZoo's classic games: plane 0 its pieces,
plane 1 the other player's).
"""

import copy
from typing import Any, Callable, Optional

import numpy as np
import torch

from lit_ppo.errors import ConfigError

Opponent = Callable[[np.random.Generator, np.ndarray, np.ndarray], int]


def random_move(rng: np.random.Generator, mask: np.ndarray, board: np.ndarray) -> int:
    """Uniform over the valid moves."""
    return int(rng.choice(np.flatnonzero(mask)))


def _lands(board: np.ndarray, column: int) -> int:
    """The row a piece dropped in ``column`` of a connect-four board ``[rows, columns, 2]`` lands in (row 0 is the
    top)."""
    return int(np.flatnonzero(board[:, column].sum(-1) == 0).max())


def _connects(pieces: np.ndarray, row: int, column: int, length: int = 4) -> bool:
    """Whether a piece at ``(row, column)`` makes ``length`` in a line with ``pieces`` (a boolean board)."""
    rows, columns = pieces.shape
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        count = 1
        for sign in (1, -1):
            r, c = row + sign * dr, column + sign * dc
            while 0 <= r < rows and 0 <= c < columns and pieces[r, c]:
                count, r, c = count + 1, r + sign * dr, c + sign * dc
        if count >= length:
            return True
    return False


def win_or_block(rng: np.random.Generator, mask: np.ndarray, board: np.ndarray) -> int:
    """Connect four's simple scripted player: a move that wins now if there is one, else one that stops the other
    player winning on their next move, else a random valid move."""
    if board.ndim != 3 or board.shape[-1] != 2 or board.shape[1] != mask.size:
        raise ConfigError(f"data.vectorization.opponent: 'win_or_block' plays connect four (a [rows, columns, 2] "
                          f"board with a move per column); this game observes {board.shape} with {mask.size} "
                          "moves. Use opponent: random.")
    valid = np.flatnonzero(mask)
    pieces = board.astype(bool)
    for plane in (0, 1):  # first our own four (a win), then theirs (a block)
        for column in valid:
            if _connects(pieces[..., plane], _lands(board, column), column):
                return int(column)
    return int(rng.choice(valid))


OPPONENTS: dict[str, Opponent] = {"random": random_move, "win_or_block": win_or_block}


def fixed_opponent(name: str) -> Opponent:
    """The opponent called ``name`` in :data:`OPPONENTS`, or a clear error naming the choices."""
    if name not in OPPONENTS:
        raise ConfigError(f"data.vectorization.opponent: must be one of {sorted(OPPONENTS)}, got {name!r}.")
    return OPPONENTS[name]


class PolicyOpponent:
    """A policy as an opponent: it samples its move among the valid ones (stochastic, as the learner acts while it
    trains), its randomness drawn from the game copy's ``rng``. ``policy`` is anything with lit_ppo's ``act`` (an
    ``ActorCritic``, or the acting form the collector plays with); feed-forward only."""

    def __init__(self, policy: Any, deterministic: bool = False) -> None:
        self.policy, self.deterministic = policy, deterministic

    def __call__(self, rng: np.random.Generator, mask: np.ndarray, board: np.ndarray) -> int:
        obs = torch.as_tensor(np.asarray(board, np.float32).reshape(1, -1))
        generator = torch.Generator().manual_seed(int(rng.integers(2 ** 62)))
        with torch.inference_mode():
            action = self.policy.act(obs, generator, self.deterministic, torch.as_tensor(mask[None], dtype=torch.bool))[0]
        return int(action.reshape(-1)[0])


class SnapshotPool:
    """Self-play's opponent pool: the learner's snapshots, the newest ``size`` kept (the oldest dropped first).

    The rule a game's opponent is drawn by (:meth:`draw`): with probability ``fixed_share``, or while the pool is
    empty, the fixed opponent (random or scripted: what keeps the learner from forgetting how to beat a plain
    player); otherwise a snapshot drawn uniformly from the pool, the newest included."""

    def __init__(self, size: int, snapshot_every: int, fixed_share: float) -> None:
        if size < 1 or snapshot_every < 1 or not 0.0 <= fixed_share <= 1.0:
            raise ConfigError(f"data.vectorization.self_play: pool_size and snapshot_every must be >= 1 and "
                              f"fixed_share in [0, 1], got {size}, {snapshot_every} and {fixed_share}.")
        self.size, self.snapshot_every, self.fixed_share = size, snapshot_every, fixed_share
        self.snapshots: list[PolicyOpponent] = []
        self.taken = 0  # snapshots taken in all (rollout numbers are the collector's)

    def see(self, policy: Any, rollout: int) -> None:
        """The policy the learner acts with at the start of rollout ``rollout``: kept every ``snapshot_every``
        rollouts, from the first."""
        if rollout % self.snapshot_every:
            return
        if getattr(policy, "state_size", 0):
            raise ConfigError("data.vectorization.self_play: the snapshots play feed-forward; drop model.recurrent "
                              "or self-play.")
        self.snapshots = (self.snapshots + [PolicyOpponent(copy.deepcopy(policy))])[-self.size:]
        self.taken += 1

    def draw(self, rng: np.random.Generator, fixed: Opponent) -> Opponent:
        if not self.snapshots or rng.random() < self.fixed_share:
            return fixed
        return self.snapshots[int(rng.integers(len(self.snapshots)))]


def snapshot_pool(self_play: Optional[dict[str, Any]]) -> Optional[SnapshotPool]:
    """``data.vectorization.self_play`` (``{pool_size, snapshot_every, fixed_share}``, defaults 8, 5 and 0.2) as a
    pool; None: no self-play."""
    if self_play is None:
        return None
    unknown = set(self_play) - {"pool_size", "snapshot_every", "fixed_share"}
    if unknown:
        raise ConfigError(f"data.vectorization.self_play: unknown key(s) {sorted(unknown)}; the keys are "
                          "pool_size, snapshot_every and fixed_share.")
    return SnapshotPool(int(self_play.get("pool_size", 8)), int(self_play.get("snapshot_every", 5)),
                        float(self_play.get("fixed_share", 0.2)))

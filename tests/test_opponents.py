"""The opponents of two-player games (lit_ppo.envs.opponents): connect four's scripted player on hand-made boards,
the snapshot pool's rule, and self-play from the command line: snapshots in the pool, kept in the checkpoint, a
stopped and resumed run bit-identical to one run."""

import numpy as np
import pytest
import torch

from lit_ppo.envs.opponents import SnapshotPool, fixed_opponent, random_move, snapshot_pool, win_or_block
from lit_ppo.errors import ConfigError


def board(own=(), theirs=()):
    """A connect-four board [6 rows (0 the top), 7 columns, 2 planes] from the mover's seat."""
    b = np.zeros((6, 7, 2), np.int8)
    for r, c in own:
        b[r, c, 0] = 1
    for r, c in theirs:
        b[r, c, 1] = 1
    return b


def test_win_or_block_wins_first_then_blocks_then_plays_at_random():
    rng, valid = np.random.default_rng(0), np.ones(7, bool)
    # three of its own in the bottom row (columns 0-2) and three of theirs stacked in column 5: it wins (column 3)
    # rather than block
    b = board(own=[(5, 0), (5, 1), (5, 2)], theirs=[(5, 5), (4, 5), (3, 5)])
    assert win_or_block(rng, valid, b) == 3
    # the same threat without a win of its own: it blocks the column
    b = board(own=[(5, 0), (5, 1)], theirs=[(5, 5), (4, 5), (3, 5)])
    assert win_or_block(rng, valid, b) == 5
    # a diagonal four that needs a piece landing on top of others: column 3 lands in row 2 (rows 3-5 are full)
    b = board(own=[(5, 0), (4, 1), (3, 2), (4, 2), (5, 3)], theirs=[(5, 1), (5, 2), (4, 3), (3, 3)])
    assert win_or_block(rng, valid, b) == 3
    # nothing to win or block: any valid move, as the random player would (same rng, same draw)
    mask = np.array([0, 1, 0, 1, 0, 0, 1], bool)
    moves = {win_or_block(np.random.default_rng(s), mask, board()) for s in range(20)}
    assert moves == {1, 3, 6}
    assert win_or_block(np.random.default_rng(3), mask, board()) == random_move(np.random.default_rng(3), mask, board())


def test_a_bad_opponent_or_pool_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match="opponent: must be one of"):
        fixed_opponent("minimax")
    with pytest.raises(ConfigError, match="'win_or_block' plays connect four"):  # tic-tac-toe: a move per cell
        win_or_block(np.random.default_rng(0), np.ones(9, bool), np.zeros((3, 3, 2)))
    with pytest.raises(ConfigError, match="unknown key"):
        snapshot_pool({"pool": 3})
    with pytest.raises(ConfigError, match="fixed_share"):
        snapshot_pool({"fixed_share": 1.5})


def test_a_list_of_fixed_opponents_gives_each_game_one_drawn_uniformly_and_reproducibly():
    pytest.importorskip("pettingzoo.classic.connect_four_v3")
    from lit_ppo.envs.turn_based import against_opponent

    def opponents(seed):
        envs = against_opponent(200, "pettingzoo.classic.connect_four_v3", opponent=["random", "win_or_block"])
        envs.reset(seed=seed)
        drawn = [o.__name__ for o in envs.opponents]
        envs.close()
        return drawn

    drawn = opponents(0)
    assert abs(drawn.count("win_or_block") / 200 - 0.5) < 0.1 and set(drawn) == {"random_move", "win_or_block"}
    assert opponents(0) == drawn and opponents(1) != drawn
    with pytest.raises(ConfigError, match="opponent: an empty list"):
        against_opponent(2, "pettingzoo.classic.connect_four_v3", opponent=[])
    with pytest.raises(ConfigError, match="opponent: must be one of"):
        against_opponent(2, "pettingzoo.classic.connect_four_v3", opponent=["random", "minimax"])


def test_the_pool_keeps_the_newest_snapshots_and_draws_by_its_rule():
    pool = SnapshotPool(size=2, snapshot_every=2, fixed_share=0.25)
    rng = np.random.default_rng(0)
    assert pool.draw(rng, random_move) is random_move  # empty: the fixed opponent
    policies = [torch.nn.Linear(1, 1) for _ in range(6)]
    for rollout, policy in enumerate(policies):
        pool.see(policy, rollout)  # kept at rollouts 0, 2, 4: the newest two remain
    assert pool.taken == 3 and len(pool.snapshots) == 2
    assert torch.equal(pool.snapshots[-1].policy.weight, policies[4].weight)
    assert pool.snapshots[-1].policy is not policies[4]  # a copy: the learner's later updates do not reach it
    draws = [pool.draw(rng, random_move) for _ in range(4000)]
    assert abs(np.mean([d is random_move for d in draws]) - 0.25) < 0.03
    assert abs(np.mean([d is pool.snapshots[0] for d in draws]) - 0.375) < 0.03


def test_self_play_fits_with_snapshots_in_the_checkpoint_and_resumes_bit_identically(cli_in_process, tmp_path, recwarn):
    pytest.importorskip("pettingzoo.classic.tictactoe_v3")
    vectorization = ("{class_path: lit_ppo.envs.turn_based.against_opponent, init_args: {env: "
                     "pettingzoo.classic.tictactoe_v3, self_play: {pool_size: 2, snapshot_every: 2, fixed_share: 0.3}}}")
    base = ["fit", "--config", "cartpole.yaml", "--data.env_id", "tictactoe", "--data.vectorization", vectorization,
            "--data.action_masks", "info", "--data.normalize_obs", "false", "--data.num_envs", "4",
            "--data.num_steps", "16", "--data.minibatch_size", "32", "--data.eval_episodes", "2",
            "--data.total_timesteps", str(6 * 64), "--trainer.logger", "false",
            "--trainer.callbacks.init_args.every_n_epochs", "1", "--trainer.check_val_every_n_epoch", "3"]

    def fit(*args):
        proc = cli_in_process(*base, *args, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]

    fit("--trainer.callbacks.init_args.dirpath", "full")
    fit("--trainer.callbacks.init_args.dirpath", "part", "--trainer.max_epochs", "3")
    fit("--trainer.callbacks.init_args.dirpath", "part", "--ckpt_path", "last")
    full = torch.load(tmp_path / "full/last.ckpt", weights_only=False)
    part = torch.load(tmp_path / "part/last.ckpt", weights_only=False)
    assert full["global_step"] == part["global_step"] > 0
    # the games in progress were saved as their moves (PettingZoo's classic envs alone pickle as a new game)
    assert not [w for w in recwarn if "resuming inexactly" in str(w.message)]
    for key, value in full["state_dict"].items():
        assert torch.equal(value, part["state_dict"][key]), key
    # the pool is in the checkpoint: snapshots of rollouts 0, 2 and 4, the newest two kept, each a policy that acts
    import pickle

    [rank] = full["PPODataModule"]["ranks"]
    envs = pickle.loads(rank["collector"]["envs"]).unwrapped
    assert envs.pool.taken == 3 and len(envs.pool.snapshots) == 2
    first, second = (s.policy for s in envs.pool.snapshots)
    assert any(not torch.equal(a, b) for a, b in zip(first.state_dict().values(), second.state_dict().values()))
    mask = np.zeros(9, bool)
    mask[[2, 7]] = True
    assert envs.pool.snapshots[1](np.random.default_rng(0), mask, np.zeros((3, 3, 2))) in (2, 7)


def test_an_init_arg_of_the_game_overridden_on_the_command_line_reaches_it(cli_in_process, tmp_path):
    """``--data.vectorization.init_args.opponent`` over connect_four.yaml (jsonargparse sets it beside the dict's
    class_path): a bad name is refused before training, naming the key and the choices."""
    pytest.importorskip("pettingzoo.classic.connect_four_v3")
    proc = cli_in_process("fit", "--config", "connect_four.yaml", "--data.vectorization.init_args.opponent", "minimax",
                          "--trainer.logger", "false", cwd=tmp_path)
    assert proc.returncode != 0 and "data.vectorization.opponent: must be one of ['random', 'win_or_block']" in \
        proc.stderr, proc.stderr[-2000:]
    assert not list(tmp_path.rglob("*.ckpt"))

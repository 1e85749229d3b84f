"""Several agents as rows (lit_ppo/envs/multiagent.py): the row layout, autoreset and final observations against
values written down from tests/multiagent_envs.py's ``signal`` game, the refusals, a tiny learning check and the
shipped simple_spread config from the command line."""

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from lit_ppo.envs.multiagent import parallel_rows  # noqa: E402
from lit_ppo.errors import ConfigError  # noqa: E402
from tests.multiagent_envs import Signal  # noqa: E402

SIGNAL = "tests.multiagent_envs:signal"


def bits(seed: int, agents: int = 2, steps: int = 9) -> np.ndarray:
    """The signal game's bits of one copy seeded ``seed``: [step, agent], drawn as the env draws them."""
    rng = np.random.default_rng(seed)
    return np.array([[rng.integers(2) for _ in range(agents)] for _ in range(steps)])


def test_rows_are_copies_times_agents_and_a_copy_resets_in_the_step_its_episode_ends():
    envs = parallel_rows(4, SIGNAL, {"length": 3})  # 2 copies x 2 agents
    assert envs.num_envs == 4 and envs.metadata["autoreset_mode"].name == "SAME_STEP"
    expected = [bits(10), bits(11)]  # copy c is seeded 10 + c
    obs, _ = envs.reset(seed=10)
    row_bits = lambda t: np.concatenate([expected[0][t], expected[1][t]])  # noqa: E731  row = copy * 2 + agent
    assert obs.argmax(1).tolist() == row_bits(0).tolist()
    actions = np.array([row_bits(0)[0], 1 - row_bits(0)[1], row_bits(0)[2], row_bits(0)[3]])  # row 1 answers wrong
    obs, rewards, terminated, truncated, info = envs.step(actions)
    assert rewards.tolist() == [1, 0, 1, 1] and not terminated.any() and not truncated.any() and info == {}
    assert obs.argmax(1).tolist() == row_bits(1).tolist()
    envs.step(row_bits(1))
    obs, rewards, terminated, truncated, info = envs.step(row_bits(2))  # the 3rd step: every agent truncated
    assert rewards.tolist() == [1, 1, 1, 1] and truncated.all() and not terminated.any()
    assert info["_final_obs"].all() and [o.argmax() for o in info["final_obs"]] == row_bits(3).tolist()
    # reset in the same step, each copy's generator going on (no new seed): the bits after the final ones
    assert obs.argmax(1).tolist() == row_bits(4).tolist()
    envs.close()


def test_agent_id_appends_the_agents_one_hot():
    envs = parallel_rows(2, SIGNAL, agent_id=True)
    obs, _ = envs.reset(seed=0)
    assert envs.single_observation_space.shape == (4,) and obs[:, 2:].tolist() == [[1, 0], [0, 1]]
    envs.close()


@pytest.mark.parametrize("kwargs,num_envs,message", [
    ({"leave_early": True}, 2, r"agent\(s\) \['agent_1'\] finished before the others.*not available yet"),
    ({"odd_space": True}, 2, "do not share one observation and action space.*one network per agent group"),
    ({}, 3, "data.num_envs: .* has 2 agents.*multiple of 2"),
], ids=["leaves_early", "other_spaces", "rows_not_a_multiple"])
def test_what_is_not_available_yet_is_refused_by_name(kwargs, num_envs, message):
    with pytest.raises(ConfigError, match=message):
        envs = parallel_rows(num_envs, SIGNAL, kwargs)
        envs.reset(seed=0)
        for _ in range(4):
            envs.step(np.zeros(num_envs, dtype=np.int64))


def test_a_turn_based_env_is_refused_with_the_fix():
    tictactoe = pytest.importorskip("pettingzoo.classic.tictactoe_v3")
    with pytest.raises(ConfigError, match="turn-based \\(AEC\\).*aec_to_parallel"):
        parallel_rows(2, "pettingzoo.classic.tictactoe_v3:env")
    assert tictactoe


def test_two_agents_sharing_one_network_learn_the_signal_game(tmp_path):
    import lightning as L

    from lit_ppo import PPODataModule, PPOModule

    L.seed_everything(0)
    vectorization = {"class_path": "lit_ppo.envs.multiagent.parallel_rows", "init_args": {"env": SIGNAL}}
    dm = PPODataModule("signal", vectorization=vectorization, num_envs=8, num_steps=16, total_timesteps=4096,
                       minibatch_size=64, update_epochs=4, eval_episodes=4, normalize_reward=False, seed=0)
    model = PPOModule(env_spec=dm.env_spec, lr=3e-3)
    trainer = L.Trainer(max_epochs=-1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, limit_val_batches=0, default_root_dir=tmp_path)
    trainer.fit(model, dm)
    [result] = L.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False,
                         default_root_dir=tmp_path).validate(model, dm, verbose=False)
    assert result["eval/return_mean"] >= 7.5  # of 8: every agent answers its own signal (random play: 4)


def test_the_simple_spread_config_trains_from_the_command_line(cli, tmp_path):
    pytest.importorskip("mpe2")
    cli("fit", "--config", "simple_spread.yaml", "--data.num_envs", "6", "--data.minibatch_size", "75",
        "--data.total_timesteps", "300", "--data.eval_episodes", "3", "--trainer.check_val_every_n_epoch", "1",
        cwd=tmp_path)
    assert (tmp_path / "runs/simple_spread/checkpoints/last.ckpt").exists()

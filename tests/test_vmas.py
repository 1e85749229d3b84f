"""VMAS scenarios as rows of one vector env (lit_ppo/envs/vmas_rows.py), with VMAS itself (the vmas extra)."""

import random
import warnings

import numpy as np
import pytest
import torch

pytest.importorskip("vmas")

from lit_ppo.envs.vmas_rows import vmas_rows  # noqa: E402
from lit_ppo.errors import ConfigError  # noqa: E402


def test_rows_are_copies_times_agents_with_the_one_hot_and_the_copy_s_observations_appended():
    envs = vmas_rows(6, "balance", env_kwargs={"n_agents": 3}, max_steps=4, agent_id=True, global_state=True)
    obs, _ = envs.reset(seed=0)
    size = 16  # balance: each agent's own observation
    assert envs.agents == ["agent_0", "agent_1", "agent_2"] and envs.local_size == size + 3
    assert obs.shape == (6, size + 3 + 3 * size) == (6, *envs.single_observation_space.shape)
    for copy in range(2):
        rows = obs[copy * 3:copy * 3 + 3]
        np.testing.assert_array_equal(rows[:, size:size + 3], np.eye(3))
        # the global state is the copy's agents' own observations in order, the same on each of its rows
        np.testing.assert_array_equal(rows[:, size + 3:], np.tile(rows[:, :size].reshape(1, -1), (3, 1)))


def test_a_copy_resets_in_the_step_its_episode_ends_and_its_rows_report_the_episode():
    envs = vmas_rows(6, "balance", env_kwargs={"n_agents": 3}, max_steps=3)
    envs.reset(seed=1)
    total = np.zeros(6)
    for step in range(3):
        obs, reward, terminated, truncated, info = envs.step(np.zeros((6, 2), np.float32))
        total += reward
        if step < 2:
            assert not (terminated | truncated).any() and "episode" not in info
    # every copy hits max_steps together: truncated, not terminated; the final observation is the pre-reset one
    assert truncated.all() and not terminated.any() and info["_final_obs"].all()
    np.testing.assert_allclose(info["episode"]["r"], total, rtol=1e-6)
    np.testing.assert_array_equal(info["episode"]["l"], 3)
    # the team's return once per copy, on its first row: its three agents' returns summed
    np.testing.assert_array_equal(info["_team_episode"], [True, False, False] * 2)
    np.testing.assert_allclose(info["team_episode"]["r"][::3], total.reshape(2, 3).sum(axis=1), rtol=1e-6)
    assert not np.array_equal(np.stack(info["final_obs"]), obs)  # obs is already the new episode's first
    _, reward, terminated, truncated, info = envs.step(np.zeros((6, 2), np.float32))
    assert not (terminated | truncated).any() and "episode" not in info


def test_vmas_leaves_the_learner_s_generators_alone_and_is_reproducible_by_seed():
    def play(seed):
        envs = vmas_rows(3, "navigation", env_kwargs={"n_agents": 3}, max_steps=5)
        first, _ = envs.reset(seed=seed)
        return first

    torch.manual_seed(7), np.random.seed(7), random.seed(7)
    before = (torch.random.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())
    a, b, c = play(3), play(3), play(4)
    assert torch.equal(before[0], torch.random.get_rng_state())
    assert np.array_equal(before[1], np.random.get_state()[1]) and before[2] == random.getstate()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("kwargs, num_envs, message", [
    ({"max_steps": 10}, 7, "num_envs must be a multiple of 3"),
    ({}, 6, "data.vectorization.max_steps"),
    ({"max_steps": 10, "env_kwargs": {"n_agents": 3, "no_such_option": 1}}, 6, "does not read {'no_such_option': 1}"),
    ({"max_steps": 10, "scenario": "no_such_scenario"}, 6, "VMAS cannot make scenario 'no_such_scenario'"),
])
def test_bad_settings_are_refused_by_name(kwargs, num_envs, message):
    kwargs = {"scenario": "navigation", "env_kwargs": {"n_agents": 3}, **kwargs}
    with pytest.raises(ConfigError, match=message):
        vmas_rows(num_envs, **kwargs)


def test_groups_lead_each_row_with_its_group_and_pad_its_observation_and_the_state_holds_every_agent_s_own():
    envs = vmas_rows(6, "simple_adversary", max_steps=4, agent_id=True, global_state=True, groups="prefix")
    obs, _ = envs.reset(seed=0)
    import vmas

    alone = vmas.make_env("simple_adversary", num_envs=2, device="cpu", max_steps=4, terminated_truncated=True)
    alone.seed(0)
    raw = [o.numpy() for o in alone.reset()]  # simple_adversary: adversary_0 observes 8 values, agent_0/1 10
    assert envs.group_spec == {"names": ["adversary", "agent"], "of_agent": [0, 1, 1], "actions": None}
    assert envs.local_size == 2 + 10 + 3 and obs.shape == (6, 15 + 8 + 10 + 10)
    for copy in range(2):
        rows = obs[copy * 3:copy * 3 + 3]
        np.testing.assert_array_equal(rows[:, :2], [[1, 0], [0, 1], [0, 1]])
        np.testing.assert_array_equal(rows[0, 2:12], np.concatenate([raw[0][copy], np.zeros(2)]))  # padded
        for i in (1, 2):
            np.testing.assert_array_equal(rows[i, 2:12], raw[i][copy])
        np.testing.assert_array_equal(rows[:, 12:15], np.eye(3))
        state = np.concatenate([raw[i][copy] for i in range(3)])  # unpadded, in agent order, on every row
        np.testing.assert_array_equal(rows[:, 15:], np.tile(state, (3, 1)))


def test_agents_of_different_spaces_need_groups_and_groups_take_discrete_choices_of_different_numbers():
    with pytest.raises(ConfigError, match="do not share one observation and action space.*data.vectorization.groups"):
        vmas_rows(4, "simple_speaker_listener", max_steps=5)
    with pytest.raises(ConfigError, match="groups act in different spaces.*continuous_actions: false"):
        vmas_rows(4, "simple_speaker_listener", max_steps=5, groups="prefix")
    with pytest.raises(ConfigError, match="data.vectorization.groups: 'simple_adversary' has no agent 'agent_2'"):
        vmas_rows(6, "simple_adversary", max_steps=5, groups={"a": ["adversary_0", "agent_0"], "b": ["agent_2"]})
    envs = vmas_rows(4, "simple_speaker_listener", max_steps=5, groups="prefix", continuous_actions=False)
    assert envs.group_spec == {"names": ["speaker", "listener"], "of_agent": [0, 1], "actions": [27, 9]}
    assert envs.single_action_space.n == 27


def test_groups_train_from_the_command_line_and_each_group_keeps_its_choices(cli_in_process, tmp_path):
    result = cli_in_process(
        "fit", "--config", "vmas_navigation.yaml", "--data.vectorization.init_args.scenario", "simple_speaker_listener",
        "--data.vectorization.init_args.env_kwargs", "{}", "--data.vectorization.init_args.continuous_actions", "false",
        "--data.vectorization.init_args.groups", "prefix", "--data.num_envs", "4", "--data.num_steps", "50",
        "--data.minibatch_size", "100", "--data.total_timesteps", "400", "--data.eval_episodes", "4",
        "--trainer.check_val_every_n_epoch", "1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    from lit_ppo import load_policy

    policy = load_policy(tmp_path / "runs/vmas_navigation/checkpoints/last.ckpt")
    envs = vmas_rows(40, "simple_speaker_listener", max_steps=5, groups="prefix", continuous_actions=False,
                     global_state=True)  # as vmas_navigation.yaml
    obs, _ = envs.reset(seed=3)
    actions, _ = policy.predict(obs)  # sampled
    assert actions[1::2].max() < 9 <= actions[0::2].max()  # the listener never picks a choice it lacks


def test_pickled_rows_continue_their_episodes_bit_for_bit():
    # The collector saves its environments by pickling them: the copy must step and reset as the original would,
    # VMAS's own generator state (its resets' draws) included.
    import pickle

    envs = vmas_rows(6, "navigation", env_kwargs={"n_agents": 3}, max_steps=4, agent_id=True)
    envs.reset(seed=5)
    actions = np.random.default_rng(0).uniform(-1, 1, (9, 6, 2)).astype(np.float32)
    envs.step(actions[0])
    saved = pickle.dumps(envs)

    def play(rows):  # 8 steps: each copy's episode ends twice (max_steps 4), so resets draw from VMAS's generator
        return [np.concatenate([obs.ravel(), reward]) for obs, reward, *_ in map(rows.step, actions[1:])]
    expected = play(envs)
    for got, want in zip(play(pickle.loads(saved)), expected):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("overlap", ["false", "true"])
def test_a_stopped_and_resumed_fit_ends_bit_identical_to_one_run(cli_in_process, tmp_path, overlap):
    # The checkpoint holds the VMAS episodes in progress (max_steps 25: every save falls mid-episode), so the resumed
    # run plays on from them, with evaluations (VMAS's generator is one per process) between the saves.
    base = ["fit", "--config", "vmas_navigation.yaml", "--data.num_envs", "6", "--data.num_steps", "10",
            "--data.minibatch_size", "30", "--data.update_epochs", "1", "--data.total_timesteps", "360",
            "--data.eval_episodes", "6", "--data.vectorization.init_args.max_steps", "25", "--model.hidden_sizes",
            "[16]", "--data.overlap", overlap, "--trainer.check_val_every_n_epoch", "2", "--trainer.logger", "false",
            "--trainer.callbacks.init_args.every_n_epochs", "1"]
    for args in (["--trainer.callbacks.init_args.dirpath", "full"],
                 ["--trainer.callbacks.init_args.dirpath", "part", "--trainer.max_epochs", "3"],
                 ["--trainer.callbacks.init_args.dirpath", "part", "--ckpt_path", "last"]):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = cli_in_process(*base, *args, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        # the resume did not reset the environments (it would say so: "resuming inexactly ... could not be saved")
        assert not [w for w in caught if "resuming inexactly" in str(w.message)]
    full = torch.load(tmp_path / "full/last.ckpt", weights_only=False)
    part = torch.load(tmp_path / "part/last.ckpt", weights_only=False)
    assert full["global_step"] == part["global_step"] > 0
    for key, value in full["state_dict"].items():
        assert torch.equal(value, part["state_dict"][key]), key


def test_the_navigation_config_trains_from_the_command_line(cli_in_process, tmp_path):
    result = cli_in_process("fit", "--config", "vmas_navigation.yaml", "--data.num_envs", "6",
                            "--data.num_steps", "100", "--data.minibatch_size", "300", "--data.total_timesteps", "1200",
                            "--data.eval_episodes", "6", "--trainer.check_val_every_n_epoch", "1", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    checkpoint = torch.load(tmp_path / "runs/vmas_navigation/checkpoints/last.ckpt", weights_only=False)
    assert checkpoint["lit_ppo_env_steps"] == 1200

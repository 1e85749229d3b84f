"""Several agents as rows (lit_ppo/envs/multiagent.py): the row layout, autoreset and final observations against
values written down from tests/multiagent_envs.py's ``signal`` game, the refusals, a tiny learning check and the
shipped simple_spread config from the command line."""

import numpy as np
import pytest
import torch

pytest.importorskip("pettingzoo")

from lit_ppo.envs.multiagent import parallel_rows  # noqa: E402
from lit_ppo.errors import ConfigError  # noqa: E402
from tests.multiagent_envs import Signal, learned_signal_return  # noqa: E402

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
    assert rewards.tolist() == [1, 0, 1, 1] and not terminated.any() and not truncated.any()
    assert list(info) == ["active"] and info["active"].all()
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


class AnswerPolicy:
    """Answers the signal (action = the observed bit); V(s) = 0, so advantages are discounted returns."""

    def act(self, obs, generator=None, deterministic=False):
        return obs[:, :2].argmax(1), torch.zeros(len(obs)), torch.zeros(len(obs)), None

    def value(self, obs):
        return torch.zeros(len(obs))


def test_an_agent_that_leaves_early_is_masked_out_of_the_rollout_against_hand_computed_values():
    # One copy, 2 agents, 5-step episodes; agent_1 terminates at step 3, agent_0 is truncated at step 5.
    # gamma 0.5, lambda 1, V = 0, reward 1 per answered step: agent_0's advantages 1.9375, 1.875, 1.75, 1.5, 1
    # (truncated: bootstrapped from V(final) = 0); agent_1's 1.75, 1.5, 1 then two inactive steps of weight 0.
    from lit_ppo.collection.collector import RolloutCollector

    envs = parallel_rows(2, SIGNAL, {"leave_early": True, "length": 5})
    collector = RolloutCollector(envs, 5, 0.5, 1.0, seed=0, generator=torch.Generator().manual_seed(0))
    data = collector.collect(AnswerPolicy())
    collector.close()
    per_row = lambda flat: flat.view(5, 2).T  # noqa: E731  step-major samples -> [row, step]
    assert per_row(data["weights"]).tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    torch.testing.assert_close(per_row(data["advantages"])[0], torch.tensor([1.9375, 1.875, 1.75, 1.5, 1.0]))
    torch.testing.assert_close(per_row(data["advantages"])[1, :3], torch.tensor([1.75, 1.5, 1.0]))
    # one episode per agent, counted when it ended (not the inactive row's steps)
    assert sorted(zip(data["episode_returns"].tolist(), data["episode_lengths"].tolist())) == [(3.0, 3.0), (5.0, 5.0)]


def test_an_inactive_row_ends_with_its_copy_and_starts_over_active():
    envs = parallel_rows(2, SIGNAL, {"leave_early": True, "length": 5})
    obs, info = envs.reset(seed=0)
    assert info["active"].tolist() == [True, True]
    actives, ends = [], []
    for _ in range(6):
        obs, _, terminated, truncated, info = envs.step(obs[:, :2].argmax(1))
        actives.append(info["active"].tolist())
        ends.append((terminated | truncated).tolist())
    assert actives == [[True, True], [True, True], [True, False], [True, False], [True, True], [True, True]]
    assert ends[2] == [False, True] and ends[4] == [True, True]  # agent_1 at step 3; both at the copy's end
    envs.close()


@pytest.mark.parametrize("kwargs,num_envs,message", [
    ({"odd_space": True}, 2, "do not share one observation and action space.*data.vectorization.groups: prefix"),
    ({}, 3, "data.num_envs: .* has 2 agents.*multiple of 2"),
], ids=["other_spaces", "rows_not_a_multiple"])
def test_what_one_shared_network_cannot_take_is_refused_by_name(kwargs, num_envs, message):
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


def test_two_agents_sharing_one_network_learn_the_signal_game_while_one_leaves_early(tmp_path):
    # agent_0 plays 8 steps, agent_1 leaves after 3: at most (8 + 3) / 2 = 5.5 per agent (random play: 2.75)
    assert learned_signal_return(tmp_path, {"env_kwargs": {"leave_early": True}}) >= 5.2


def test_the_mappo_config_trains_from_the_command_line(cli, tmp_path):
    # simple_spread.yaml (IPPO) runs as docs/multiagent.md's example (tests/test_docs.py)
    pytest.importorskip("mpe2")
    name = "simple_spread_mappo"
    cli("fit", "--config", f"{name}.yaml", "--data.num_envs", "6", "--data.minibatch_size", "75",
        "--data.total_timesteps", "300", "--data.eval_episodes", "3", "--trainer.check_val_every_n_epoch", "1",
        cwd=tmp_path)
    assert (tmp_path / f"runs/{name}/checkpoints/last.ckpt").exists()
    # one agent's policy (all agents share it) to ONNX, checked against the module by the export itself
    pytest.importorskip("onnxruntime")
    out = cli("export", "--ckpt_path", f"runs/{name}/checkpoints/last.ckpt", "--format", "onnx", cwd=tmp_path).stdout
    assert "input 'obs' float32 [batch, 75]" in out  # 18 own + 3 one-hot + 54 global state


def test_each_agent_s_return_is_logged_under_its_name(tmp_path):
    import lightning as L

    from lit_ppo import PPODataModule, PPOModule

    vectorization = {"class_path": "lit_ppo.envs.multiagent.parallel_rows",
                     "init_args": {"env": SIGNAL, "env_kwargs": {"leave_early": True}}}
    dm = PPODataModule("signal", vectorization=vectorization, num_envs=4, num_steps=8, total_timesteps=32,
                       minibatch_size=32, eval_episodes=2, seed=0)
    assert dm.env_spec["agents"] == ["agent_0", "agent_1"]
    model = PPOModule(env_spec=dm.env_spec)
    L.Trainer(max_epochs=-1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False, limit_val_batches=0, default_root_dir=tmp_path).fit(model, dm)
    metrics = model.rollout_metrics
    # one rollout of 8 steps: every agent_0 played one 8-step episode, every agent_1 one of 3 steps (return <= length;
    # random play expects 4 and 1.5, so swapped names would fail the first bound)
    assert 0 <= metrics["agents/agent_1/return_mean"] <= 3 and 0 <= metrics["agents/agent_0/return_mean"] <= 8
    assert set(k for k in metrics if k.startswith("agents/")) == {"agents/agent_0/return_mean",
                                                                 "agents/agent_1/return_mean", "agents/team_return_mean"}
    # each of the 2 copies ended its one episode at step 8: the team's return is its two agents' returns summed, so
    # over the copies it averages the two agents' means summed
    assert metrics["agents/team_return_mean"] == pytest.approx(
        metrics["agents/agent_0/return_mean"] + metrics["agents/agent_1/return_mean"])


def test_a_centralized_critic_reads_the_global_state_and_the_actor_only_its_agent_s_observation(tmp_path):
    import lightning as L

    from lit_ppo import PPODataModule, PPOModule

    envs = parallel_rows(2, SIGNAL, agent_id=True, global_state=True)
    obs, _ = envs.reset(seed=0)
    # own bit (2) + one-hot (2), then the global state: both agents' bits (Signal has no state())
    assert envs.local_size == 4 and obs.shape == (2, 8)
    assert obs[0, 4:].tolist() == obs[1, 4:].tolist() == obs[0, :2].tolist() + obs[1, :2].tolist()
    envs.close()
    vectorization = {"class_path": "lit_ppo.envs.multiagent.parallel_rows",
                     "init_args": {"env": SIGNAL, "agent_id": True, "global_state": True}}
    dm = PPODataModule("signal", vectorization=vectorization, num_envs=4, num_steps=8, total_timesteps=64,
                       minibatch_size=32, eval_episodes=2, seed=0)
    assert dm.env_spec["actor_inputs"] == 4
    model = PPOModule(env_spec=dm.env_spec, hidden_sizes=[16])
    assert model.policy.actor[0].in_features == 4 and model.policy.critic[0].in_features == 8
    # the action distribution ignores the global part; the value does not
    x = torch.rand(3, 8)
    y = torch.cat([x[:, :4], torch.rand(3, 4)], 1)
    with torch.no_grad():
        (px, vx, _), (py, vy, _) = model.policy(x), model.policy(y)
    assert torch.equal(px, py) and not torch.equal(vx, vy)
    L.Trainer(max_epochs=-1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False, limit_val_batches=0, default_root_dir=tmp_path).fit(model, dm)


def test_a_centralized_critic_with_a_recurrent_core_is_refused_by_name():
    from lit_ppo import PPODataModule, PPOModule

    vectorization = {"class_path": "lit_ppo.envs.multiagent.parallel_rows",
                     "init_args": {"env": SIGNAL, "global_state": True}}
    dm = PPODataModule("signal", vectorization=vectorization, num_envs=2, num_steps=8, minibatch_size=8)
    with pytest.raises(ConfigError, match="centralized critic.*no model.recurrent"):
        PPOModule(env_spec=dm.env_spec, recurrent={"hidden_size": 8})


@pytest.mark.parametrize("env_kwargs,groups", [
    ("{leave_early: true}", ""),
    ("{leave_early: true, odd_space: true, odd_actions: true}", ", groups: {a: [agent_0], b: [agent_1]}"),
], ids=["shared_network", "network_per_group"])
def test_agents_overlapped_stop_and_resume_bit_identically(cli_in_process, tmp_path, env_kwargs, groups):
    """Everything else still works with agents: the overlapped collector, checkpoints, a resumed run equal to one run
    (in this process: the collector is still a process of its own), with one shared network or one per group."""
    import torch

    vectorization = ('{class_path: lit_ppo.envs.multiagent.parallel_rows, init_args: {env: "' + SIGNAL + '", '
                     f'env_kwargs: {env_kwargs}, agent_id: true, global_state: true{groups}}}}}')
    base = ["fit", "--config", "cartpole.yaml", "--data.env_id", "signal", "--data.vectorization", vectorization,
            "--data.num_envs", "4", "--data.num_steps", "16", "--data.minibatch_size", "32", "--data.eval_episodes",
            "2", "--data.total_timesteps", str(6 * 64), "--data.overlap", "true", "--trainer.logger", "false",
            "--trainer.callbacks.init_args.every_n_epochs", "1"]

    def run(*args, cwd):
        assert cli_in_process(*args, cwd=cwd).returncode == 0
    run(*base, "--trainer.callbacks.init_args.dirpath", "full", cwd=tmp_path)
    run(*base, "--trainer.callbacks.init_args.dirpath", "part", "--trainer.max_epochs", "3", cwd=tmp_path)
    run(*base, "--trainer.callbacks.init_args.dirpath", "part", "--ckpt_path", "last", cwd=tmp_path)
    full = torch.load(tmp_path / "full/last.ckpt", weights_only=False)
    part = torch.load(tmp_path / "part/last.ckpt", weights_only=False)
    assert full["global_step"] == part["global_step"] > 0
    assert any(".layers.1." in key for key in full["state_dict"]) == bool(groups)
    for key, value in full["state_dict"].items():
        assert torch.equal(value, part["state_dict"][key]), key


def test_a_turn_based_game_against_an_opponent_alternates_seats_and_scores_the_learner():
    pytest.importorskip("pettingzoo.classic.tictactoe_v3")
    from lit_ppo.envs.turn_based import against_opponent

    envs = against_opponent(2, "pettingzoo.classic.tictactoe_v3")
    obs, info = envs.reset(seed=0)
    # copy 0's learner opens (an empty board); copy 1's learner has the second seat (the opponent's first mark)
    assert obs.shape == (2, 18) and info["action_mask"].shape == (2, 9) and obs.sum(1).tolist() == [0.0, 1.0]
    rng, outcomes, opened = np.random.default_rng(1), [], []
    for _ in range(60):
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in info["action_mask"]])
        obs, rewards, terminated, truncated, info = envs.step(actions)
        ended = terminated | truncated
        assert set(rewards[~ended].tolist()) <= {0.0} and set(rewards[ended].tolist()) <= {-1.0, 0.0, 1.0}
        outcomes += rewards[ended].tolist()
        opened += [obs[i].sum() for i in np.flatnonzero(ended)]  # the next game's first observation
    assert len(outcomes) >= 8 and {-1.0, 1.0} <= set(outcomes)
    # the seat alternates: after an even number of games the learner opens (empty board), after an odd the opponent
    # has made the first mark (one cell of the opponent's plane)
    assert set(opened) == {0.0, 1.0}
    envs.close()


def test_the_connect_four_config_trains_from_the_command_line_with_masks(cli, tmp_path, monkeypatch, capsys):
    pytest.importorskip("pettingzoo.classic.connect_four_v3")
    cli("fit", "--config", "connect_four.yaml", "--data.num_envs", "4", "--data.num_steps", "32",
        "--data.minibatch_size", "64", "--data.total_timesteps", "256", "--data.eval_episodes", "4",
        "--trainer.check_val_every_n_epoch", "1", cwd=tmp_path)
    assert (tmp_path / "runs/connect_four/checkpoints/last.ckpt").exists()
    # a game's evaluation logs its win, draw and loss rates beside the return (wins minus losses)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    [version] = (tmp_path / "runs/connect_four").glob("version_*")
    events = EventAccumulator(str(version))
    events.Reload()
    win, draw, loss = (events.Scalars(f"eval/{outcome}_rate")[-1].value for outcome in ("win", "draw", "loss"))
    assert win + draw + loss == pytest.approx(1.0)
    assert win - loss == pytest.approx(events.Scalars("eval/return_mean")[-1].value)
    # the checkpoint as a user plays it (benchmarks/versus.py: load_policy, the random opponent, each seat)
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    # against the random player, the scripted one and a snapshot (here: the same checkpoint)
    last = str(tmp_path / "runs/connect_four/checkpoints/last.ckpt")
    monkeypatch.setattr("sys.argv", ["versus.py", last, "--games", "3", "--opponent", "random", "win_or_block", last])
    import versus

    versus.main()
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if "player_" in line]
    assert [r[:2] for r in rows] == [[o, s] for o in ("random", "win_or_block", last[-24:])
                                     for s in ("player_0", "player_1")]
    for _, _, *rates in rows:  # wins, draws, losses of 3 games: they add up to all of them
        assert abs(sum(float(r.rstrip("%")) for r in rates) - 100.0) < 0.2
    # two deterministic policies play one game per seat; sampled moves make the games against a snapshot differ
    snapshot_rows = [r[2:] for r in rows if r[0] == last[-24:]]
    assert all("100.0%" in rates for rates in snapshot_rows)
    monkeypatch.setattr("sys.argv", ["versus.py", last, "--games", "10", "--opponent", last, "--moves", "sampled"])
    versus.main()
    sampled = [line.split()[2:] for line in capsys.readouterr().out.splitlines() if "player_" in line]
    assert len(sampled) == 2 and not all("100.0%" in rates for rates in sampled)

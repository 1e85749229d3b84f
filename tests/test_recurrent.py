"""Recurrent policies: the core's state rule by hand, the rollout's episode starts and carried state, update/acting
parity, a memory task only a recurrent policy solves, export over whole episodes, and bad settings."""

import gymnasium as gym
import lightning as L
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from lit_ppo import PPODataModule, PPOModule
from lit_ppo.errors import ConfigError
from lit_ppo.networks.actor_critic import ActorCritic
from lit_ppo.networks.recurrent import RecurrentConfig, RecurrentCore
from lit_ppo.collection.collector import RolloutCollector
from tests.vector_envs import counters

POMDP = [{"class_path": "lit_ppo.wrappers.KeepObservationIndices", "init_args": {"indices": [0, 2]}}]
MEMORY = "tests.memory_envs:CueRecall"


def test_one_lstm_step_from_zero_state_by_hand():
    # input 1, hidden 1: from h = c = 0, c' = i * g and h' = o * tanh(c'); the forget gate has nothing to forget
    core = RecurrentCore(1, RecurrentConfig("lstm", hidden_size=1))
    with torch.no_grad():
        core.cell.weight_ih_l0.copy_(torch.tensor([[0.5], [1.0], [2.0], [-1.0]]))  # gates i, f, g, o
        core.cell.weight_hh_l0.fill_(3.0)  # multiplies h = 0: no effect on the first step
    x = torch.tensor([[[0.8]]])
    out, state = core(x, torch.randn(1, 2), torch.tensor([[True]]))  # the random state is zeroed: a start
    i, g, o = torch.sigmoid(torch.tensor(0.4)), torch.tanh(torch.tensor(1.6)), torch.sigmoid(torch.tensor(-0.8))
    c = i * g
    h = o * torch.tanh(c)
    torch.testing.assert_close(out.flatten(), h.view(1))
    torch.testing.assert_close(state, torch.stack([h, c]).view(1, 2))  # the state is [h, c]


@pytest.mark.parametrize("cell,layers", [("lstm", 1), ("lstm", 2), ("gru", 1)])
def test_a_sequence_with_episode_starts_equals_stepping_one_step_at_a_time(cell, layers):
    # the update's padded episode pieces against acting's one step at a time
    torch.manual_seed(0)
    core = RecurrentCore(3, RecurrentConfig(cell, hidden_size=5, layers=layers))
    steps, n = 7, 3
    x = torch.randn(steps, n, 3)
    starts = torch.zeros(steps, n, dtype=torch.bool)
    starts[2, 0] = starts[5, 1] = starts[5, 2] = True
    starts[0, 1] = starts[steps - 1, 0] = True  # a start at the first step (zero state) and one at the last
    initial = torch.randn(n, core.state_size)
    out, final = core(x, initial, starts)
    assert final is None  # a sequence's outputs only: the update needs nothing else
    state, stepped = initial, []
    for t in range(steps):
        y, state = core(x[t:t + 1], state, starts[t:t + 1])
        stepped.append(y)
    torch.testing.assert_close(out, torch.cat(stepped))
    # a start means a fresh episode: env 0 from step 2 on is what a zero state gives on its inputs alone
    fresh, _ = core(x[2:, :1], torch.randn(1, core.state_size), starts[2:, :1])
    torch.testing.assert_close(out[2:, :1], fresh)


class CountingMemory:
    """A recurrent stand-in: its state counts the inputs since the episode start; value = that count."""

    state_size = 1

    def act(self, obs, generator=None, deterministic=False, state=None, starts=None):
        state = state * (~starts).float().unsqueeze(1) + 1
        n = obs.shape[0]
        return torch.zeros(n, dtype=torch.long), torch.zeros(n), state[:, 0].clone(), state

    def value(self, obs, state, starts=None):
        kept = state if starts is None else state * (~starts).float().unsqueeze(1)
        return kept[:, 0] + 1  # the count after this input too


@pytest.mark.parametrize("mode,steps,starts", [
    # 3-step episodes: same-step, the step after a done starts one
    (AutoresetMode.SAME_STEP, 6, [1, 0, 0, 1, 0, 0]),
    # next-step: the step after the done is the reset step (its input the final observation); the next one starts
    (AutoresetMode.NEXT_STEP, 8, [1, 0, 0, 0, 1, 0, 0, 0]),
])
def test_episode_starts_and_the_carried_state_by_hand(mode, steps, starts):
    envs = gym.wrappers.vector.RecordEpisodeStatistics(counters(2, mode.value))
    collector = RolloutCollector(envs, steps, 0.5, 1.0, seed=0, generator=torch.Generator().manual_seed(0),
                                 state_size=1)
    first = collector.collect(CountingMemory())
    second = collector.collect(CountingMemory())
    collector.close()
    for data in (first, second):
        assert data["episode_starts"].view(steps, 2).T.int().tolist() == [starts, starts]
    assert first["recurrent_states"].flatten().tolist() == [0.0, 0.0]
    # the second rollout starts from the state the first left: 3 inputs into the episode (same-step) / the reset
    # step's final observation counted too (next-step)
    expected = 3.0 if mode == AutoresetMode.SAME_STEP else 4.0
    assert second["recurrent_states"].flatten().tolist() == [expected, expected]
    values = first["values"].view(steps, 2).T
    if mode == AutoresetMode.SAME_STEP:
        assert values[0].tolist() == [1, 2, 3, 1, 2, 3]
    else:
        assert values[0].tolist() == [1, 2, 3, 4, 1, 2, 3, 4]


def test_a_truncated_episode_is_bootstrapped_from_the_state_after_its_last_input():
    envs = gym.wrappers.vector.RecordEpisodeStatistics(counters(2, "SameStep"))
    collector = RolloutCollector(envs, 3, 0.5, 1.0, seed=0, generator=torch.Generator().manual_seed(0), state_size=1)
    collector.collect(CountingMemory())
    # env 1 is truncated at its 3rd step: V(final obs) continues the episode's count (3 inputs, then the 4th)
    assert collector.final_values[2].tolist() == [0.0, 4.0]
    collector.close()


@pytest.mark.parametrize("vectorization", ["sync", "native"])  # same-step and next-step autoreset
def test_the_update_recomputes_the_rollouts_log_probs_before_the_first_step(vectorization):
    torch.manual_seed(0)
    dm = PPODataModule("CartPole-v1", wrappers=POMDP if vectorization == "sync" else None, num_envs=4, num_steps=48,
                       minibatch_size=96, vectorization=vectorization, seed=3)
    model = PPOModule(env_spec=dm.env_spec, recurrent={"cell": "lstm", "hidden_size": 16})
    dm.set_policy(model.policy)
    dataset = dm.build_rollout_dataset(dm.placement)
    rollouts = [next(iter(dataset)) for _ in range(2)]  # the second starts from carried, non-zero states
    rollout = rollouts[1]
    assert rollout.recurrent_states.abs().sum() > 0 and rollout.episode_starts.any()
    for index in rollout.minibatch_indices.flatten(0, 1):
        mb = rollout.minibatch(index)
        logprob, _, value = model.policy.evaluate(mb.obs, mb.actions, None, mb.recurrent_states, mb.episode_starts)
        torch.testing.assert_close(logprob, mb.logprobs, atol=1e-5, rtol=0)
        torch.testing.assert_close(value, mb.values, atol=1e-5, rtol=0)


def test_sequence_minibatches_are_whole_environments_step_major():
    dm = PPODataModule("CartPole-v1", num_envs=4, num_steps=5, minibatch_size=10, update_epochs=3)
    dm.set_policy(ActorCritic.from_env_spec(dm.env_spec, recurrent={"hidden_size": 4}))
    indices = dm.build_rollout_dataset(dm.placement).minibatch_indices()
    assert indices.shape == (3, 2, 10)
    for epoch in indices:
        rows = epoch.view(2, 5, 2)  # [minibatch, step, env]
        envs = rows[:, 0]
        assert sorted(envs.flatten().tolist()) == [0, 1, 2, 3]  # every env once per pass
        assert torch.equal(rows, torch.arange(5).view(1, 5, 1) * 4 + envs.unsqueeze(1))


def _fit_memory(recurrent, seed=1):
    torch.set_num_threads(1)
    L.seed_everything(seed)
    dm = PPODataModule(MEMORY, num_envs=8, num_steps=16, minibatch_size=64, update_epochs=4, total_timesteps=20_000,
                       seed=seed, eval_episodes=100)
    model = PPOModule(env_spec=dm.env_spec, recurrent=recurrent, lr=1e-3, anneal_lr=True, ent_coef=0.01)
    trainer = L.Trainer(max_epochs=-1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0, check_val_every_n_epoch=10**6)
    trainer.fit(model, dm)
    [result] = trainer.validate(model, dm, verbose=False)
    return result["eval/return_mean"], model.rollout_metrics["rollout/return_mean"]


def test_a_cue_seen_only_at_the_first_step_is_recalled_by_a_recurrent_policy_only():
    """Best a feed-forward policy can do is 0 in expectation; seed 1 here: LSTM 1.0, feed-forward 0.18 (100
    deterministic episodes; training return -0.10)."""
    lstm_eval, lstm_train = _fit_memory({"cell": "lstm", "hidden_size": 32})
    ff_eval, ff_train = _fit_memory(None)
    assert lstm_eval >= 0.9 and lstm_train >= 0.9, (lstm_eval, lstm_train)
    assert ff_eval <= 0.5 and ff_train <= 0.5, (ff_eval, ff_train)


@pytest.mark.parametrize("recurrent,message", [
    ({"cell": "rnn"}, "model.recurrent.cell: must be one of ('lstm', 'gru')"),
    ({"hidden": 64}, "model.recurrent: unknown key(s) ['hidden']"),
    ({"layers": 0}, "model.recurrent.layers: must be a positive integer"),
    ("lstm", "model.recurrent: must be a mapping"),
])
def test_a_bad_recurrent_setting_is_named(recurrent, message):
    dm = PPODataModule("CartPole-v1")
    with pytest.raises(ConfigError) as err:
        PPOModule(env_spec=dm.env_spec, recurrent=recurrent)
    assert message in str(err.value)


def test_a_minibatch_that_is_not_whole_sequences_is_refused_before_training(cli_in_process, tmp_path):
    proc = cli_in_process("fit", "--config", "cartpole_pomdp.yaml", "--data.num_steps", "24",
                          "--data.minibatch_size", "64",
                          "--trainer.logger", "false", "--trainer.enable_progress_bar", "false", cwd=tmp_path)
    assert proc.returncode == 2
    assert ("data.minibatch_size: with model.recurrent a minibatch is the whole rollouts of some environments, so it "
            "must be data.num_steps (24) times a divisor of data.num_envs (8), i.e. one of [24, 48, 96, 192]; "
            "got 64") in proc.stderr, proc.stderr
    assert not (tmp_path / "runs").exists()  # nothing written


def test_recurrent_fit_resumes_bit_identically_predicts_and_exports_over_a_whole_episode(cli, cli_in_process,
                                                                                          tmp_path):
    onnxruntime = pytest.importorskip("onnxruntime")
    base = ["--config", "cartpole_pomdp.yaml", "--trainer.enable_progress_bar", "false", "--trainer.logger", "false",
            "--data.total_timesteps", str(6 * 256), "--model.recurrent", "{cell: lstm, hidden_size: 16, layers: 1}"]
    # the fits in fresh processes, as a resume happens
    cli("fit", *base, "--trainer.callbacks.init_args.dirpath", "full", cwd=tmp_path)
    cli("fit", *base, "--trainer.callbacks.init_args.dirpath", "part", "--trainer.max_epochs", "3", cwd=tmp_path)
    cli("fit", *base, "--trainer.callbacks.init_args.dirpath", "part", "--ckpt_path", "last", cwd=tmp_path)
    full, part = (torch.load(tmp_path / d / "last.ckpt", weights_only=False) for d in ("full", "part"))
    assert full["global_step"] == part["global_step"] == 6 * 20
    for key, value in full["state_dict"].items():
        assert torch.equal(value, part["state_dict"][key]), key
    predicted = cli_in_process("predict", *base[:2], *base[-2:], "--ckpt_path", "full/last.ckpt",
                               "--data.eval_episodes", "3", "--trainer.logger", "false", cwd=tmp_path)
    assert predicted.returncode == 0 and "predict: 3 episodes" in predicted.stdout, predicted.stderr
    exported = cli_in_process("export", "--ckpt_path", "full/last.ckpt", "--format", "onnx", "--output", "p.onnx",
                              cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert "input 'obs' float32 [batch, 2], 'state' float32 [batch, 32] -> output 'action' int64 [batch], " \
           "'next_state' float32 [batch, 32]" in exported.stdout
    assert cli_in_process("export", "--ckpt_path", "full/last.ckpt", "--format", "torchscript", "--output", "p.pt",
                          cwd=tmp_path).returncode == 0
    # the files, fed their own states, act as the checkpoint's policy over a whole episode
    policy = PPOModule.load_from_checkpoint(tmp_path / "full/last.ckpt", map_location="cpu").policy.eval()
    session = onnxruntime.InferenceSession(str(tmp_path / "p.onnx"), providers=["CPUExecutionProvider"])
    script = torch.jit.load(str(tmp_path / "p.pt"))
    env = gym.wrappers.TransformObservation(gym.make("CartPole-v1"), lambda o: o[[0, 2]],
                                            gym.spaces.Box(-np.inf, np.inf, (2,), np.float32))
    obs, _ = env.reset(seed=5)
    state = onnx_state = script_state = torch.zeros(1, 32)
    steps = 0
    with torch.no_grad():
        while True:
            x = torch.as_tensor(obs, dtype=torch.float32).unsqueeze(0)
            action, _, _, state = policy.act(x, deterministic=True, state=state)
            onnx_action, onnx_state = session.run(None, {"obs": x.numpy(), "state": np.asarray(onnx_state)})
            script_action, script_state = script(x, script_state)
            assert onnx_action.tolist() == action.tolist() == script_action.tolist(), steps
            np.testing.assert_allclose(onnx_state, state.numpy(), atol=1e-5)
            obs, _, terminated, truncated, _ = env.step(int(action))
            steps += 1
            if terminated or truncated:
                break
    assert steps > 1


def test_recurrent_policy_with_action_masks_trains_in_lockstep_under_ddp(cli, tmp_path):
    """2 gloo processes, a GRU core and invalid-action masks: both ranks end with the same network, and every
    episode of both runs its 20 valid steps (an invalid action would end one at once, -10)."""
    import csv

    cli("fit", "--config", "cartpole_pomdp.yaml", "--data.env_id", "tests.masked_envs:LitPPOTest/InvalidActions-v0",
        "--data.wrappers", "null", "--data.action_masks", "method", "--model.recurrent",
        "{cell: gru, hidden_size: 16, layers: 1}", "--data.total_timesteps", str(2 * 256 * 4),
        "--trainer.strategy", "ddp", "--trainer.devices", "2", "--trainer.enable_progress_bar", "false",
        "--trainer.logger", "lightning.pytorch.loggers.CSVLogger", "--trainer.logger.save_dir", "logs",
        "--trainer.callbacks+=tests.ddp_probe.RankProbe", cwd=tmp_path)
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1))
    for key, value in r0["params"].items():
        assert torch.equal(value, r1["params"][key]), key
    assert not torch.equal(r0["obs"], r1["obs"])
    [metrics] = tmp_path.glob("logs/*/version_*/metrics.csv")
    rows = [r for r in csv.DictReader(metrics.open()) if r.get("rollout/return_mean")]
    assert len(rows) == 4 and all(float(r["rollout/return_mean"]) == 20.0 for r in rows), rows

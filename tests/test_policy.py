"""``lit_ppo.load_policy`` and ``TrainedPolicy.predict``: whole episodes played with it score what ``validate`` scores,
one observation at a time or batched, with normalization, bounds, Dict observations, recurrent state and masks."""

import re
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

import lit_ppo
from lit_ppo.checkpointing.files import CheckpointError
from lit_ppo.envs.make import make_evaluation_env, make_vector_env

QUIET = ["--trainer.logger", "false", "--trainer.enable_progress_bar", "false"]
EPISODES = 4
EVAL_SEED = 1 + 1_000_003  # validate's evaluation seed: seed_everything 1 + the offset of lit_ppo.collection.datamodule


def _fit(cli_in_process, cwd, *args):
    proc = cli_in_process("fit", "--config", "cartpole.yaml", *args, *QUIET, cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return cwd / "runs/cartpole/checkpoints/last.ckpt"


def _validate(cli_in_process, cwd, ckpt, *args) -> float:
    proc = cli_in_process("validate", "--ckpt_path", ckpt, "--data.eval_episodes", str(EPISODES), *args, *QUIET,
                          cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return float(re.search(r"eval/return_mean\s*│?\s*([-\d.]+)", proc.stdout).group(1))


def _play_batched(policy, envs, masks=None) -> np.ndarray:
    """validate's protocol through predict: the first episode of each environment, deterministic."""
    obs, info = envs.reset(seed=EVAL_SEED)
    returns, finished, state = np.zeros(envs.num_envs), np.zeros(envs.num_envs, bool), None
    while not finished.all():
        extra = {} if masks is None else {"action_masks": np.stack(envs.unwrapped.call("action_masks"))}
        action, state = policy.predict(obs, state=state, deterministic=True, **extra)
        obs, reward, terminated, truncated, info = envs.step(action)
        returns += reward * ~finished
        finished |= terminated | truncated
    return returns


def _play_one(policy, env, seed) -> float:
    obs, _ = env.reset(seed=seed)
    total, state, start = 0.0, None, True
    while True:
        action, state = policy.predict(obs, state=state, episode_start=start, deterministic=True)
        assert env.action_space.contains(action), action  # as the env takes it: in bounds, its dtype
        obs, reward, terminated, truncated, _ = env.step(action)
        total, start = total + float(reward), False
        if terminated or truncated:
            return total


@pytest.mark.parametrize("env_id, args", [
    ("Pendulum-v1", ["--data.normalize_obs", "true", "--data.normalize_reward", "true"]),  # Box actions, statistics
    ("CartPole-v1", ["--model.recurrent", "{hidden_size: 16}", "--data.minibatch_size", "256"]),  # recurrent state
])
def test_predict_plays_the_episodes_validate_plays(cli_in_process, tmp_path, env_id, args):
    ckpt = _fit(cli_in_process, tmp_path, "--data.env_id", env_id, "--data.total_timesteps", "2048", *args)
    expected = _validate(cli_in_process, tmp_path, ckpt)
    policy = lit_ppo.load_policy(ckpt)
    assert policy.recurrent == ("--model.recurrent" in args)
    envs = make_evaluation_env(env_id, EPISODES, seed=EVAL_SEED)
    try:
        returns = _play_batched(policy, envs)
    finally:
        envs.close()
    assert returns.mean() == pytest.approx(expected, abs=0.05)  # validate prints the mean to 4 significant digits
    # one observation at a time: a plain gym.make env plays the episode of the first env of a sync vector env
    # seeded alike (validate's CartPole runs gymnasium's native vector env, whose seeding differs)
    envs = make_vector_env(env_id, EPISODES, "sync")
    try:
        batched = _play_batched(policy, envs)
    finally:
        envs.close()
    assert _play_one(policy, gym.make(env_id), EVAL_SEED) == pytest.approx(batched[0], rel=1e-5, abs=1e-3)


def test_predict_takes_action_masks(cli_in_process, tmp_path):
    masked = "tests.masked_envs:LitPPOTest/InvalidActions-v0"
    ckpt = _fit(cli_in_process, tmp_path, "--data.env_id", masked, "--data.action_masks", "method",
                "--data.total_timesteps", "2048")
    expected = _validate(cli_in_process, tmp_path, ckpt, "--data.env_id", masked)
    policy = lit_ppo.load_policy(ckpt)
    envs = make_evaluation_env(masked, EPISODES, seed=EVAL_SEED)
    try:
        returns = _play_batched(policy, envs, masks=True)
    finally:
        envs.close()
    assert returns.mean() == pytest.approx(expected, abs=0.05)
    obs = envs.single_observation_space.sample()
    with pytest.raises(ValueError, match="trained with action masks"):
        policy.predict(obs)


def test_predict_takes_dict_observations_and_clips_box_actions(cli_in_process, tmp_path):
    # tests/test_spaces.py's SpacesEnv: a Dict of image, Box, Discrete and MultiBinary parts; it raises on any action
    # outside its Box(-0.5, 0.5), so every step below checks the bounds
    env_id, kwargs = "tests.test_spaces:LitPPOTest/Spaces-v0", "{obs: dict, act: box}"
    ckpt = _fit(cli_in_process, tmp_path, "--data.env_id", env_id, "--data.env_kwargs", kwargs,
                "--data.total_timesteps", "512", "--data.num_steps", "64", "--data.minibatch_size", "128")
    expected = _validate(cli_in_process, tmp_path, ckpt, "--data.env_id", env_id, "--data.env_kwargs", kwargs)
    policy = lit_ppo.load_policy(ckpt)
    envs = make_evaluation_env(env_id, EPISODES, {"obs": "dict", "act": "box"}, seed=EVAL_SEED)
    try:
        returns = _play_batched(policy, envs)
    finally:
        envs.close()
    assert returns.mean() == pytest.approx(expected, abs=0.05)


def test_a_wrong_observation_shape_is_named(cli_in_process, tmp_path):
    policy = lit_ppo.load_policy(_fit(cli_in_process, tmp_path, "--data.total_timesteps", "512"))
    with pytest.raises(ValueError, match=r"shape \(3,\) is neither one observation.*\(n, 4\)"):
        policy.predict(np.zeros(3, np.float32))
    action, state = policy.predict(np.zeros(4, np.float32))
    assert state is None and np.ndim(action) == 0
    actions, _ = policy.predict(np.zeros((5, 4), np.float32))
    assert actions.shape == (5,)


def test_a_checkpoint_without_lit_ppo_settings_is_named(tmp_path):
    path = tmp_path / "other.ckpt"
    torch.save({"state_dict": {}, "hyper_parameters": {"lr": 0.1}}, path)  # a Lightning checkpoint of another model
    with pytest.raises(CheckpointError, match=r"other.ckpt: no lit_ppo settings in it .*python -m lit_ppo fit"):
        lit_ppo.load_policy(path)


def test_acting_with_a_trained_policy_does_not_import_lightning(cli_in_process, tmp_path):
    # a process that only acts (a robot, a web service) skips Lightning's ~3-s import: lit_ppo.checkpointing.files
    ckpt = _fit(cli_in_process, tmp_path, "--data.total_timesteps", "512")
    code = ("import sys, numpy, lit_ppo\n"
            f"action, _ = lit_ppo.load_policy({str(ckpt)!r}).predict(numpy.zeros(4, numpy.float32))\n"
            "print(int(action), sorted({m.split('.')[0] for m in sys.modules} & {'lightning', 'pytorch_lightning'}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split()[1:] == ["[]"], proc.stdout


@pytest.mark.parametrize("fmt, suffix", [("onnx", ".onnx"), ("torchscript", ".pt")])
def test_an_exported_file_loads_and_plays_as_its_checkpoint(cli_in_process, tmp_path, fmt, suffix):
    ckpt = _fit(cli_in_process, tmp_path, "--data.env_id", "Pendulum-v1", "--data.total_timesteps", "2048",
                "--data.normalize_obs", "true")
    proc = cli_in_process("export", "--ckpt_path", ckpt, "--format", fmt, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    exported, checkpoint = lit_ppo.load_policy(ckpt.with_suffix(suffix)), lit_ppo.load_policy(ckpt)
    returns = []
    for policy in (exported, checkpoint):
        envs = make_evaluation_env("Pendulum-v1", EPISODES, seed=EVAL_SEED)
        try:
            returns.append(_play_batched(policy, envs))
        finally:
            envs.close()
    np.testing.assert_allclose(returns[0], returns[1], rtol=1e-4)  # normalization and clipping in the file
    with pytest.raises(ValueError, match="exported deterministic"):
        exported.predict(np.zeros(3, np.float32))  # SB3's default is a sample; the file takes the mode


def test_an_exported_recurrent_policy_carries_its_state_as_the_checkpoint(cli_in_process, tmp_path):
    ckpt = _fit(cli_in_process, tmp_path, "--model.recurrent", "{hidden_size: 16}", "--data.minibatch_size", "256",
                "--data.total_timesteps", "2048")
    assert cli_in_process("export", "--ckpt_path", ckpt, "--format", "torchscript", cwd=tmp_path).returncode == 0
    exported, checkpoint = lit_ppo.load_policy(ckpt.with_suffix(".pt")), lit_ppo.load_policy(ckpt)
    assert exported.recurrent and checkpoint.recurrent
    plays = [_play_one(policy, gym.make("CartPole-v1"), EVAL_SEED) for policy in (exported, checkpoint)]
    assert plays[0] == plays[1]

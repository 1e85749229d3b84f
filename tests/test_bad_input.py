"""Bad settings fail fast, before any environment step or file is written, with the key and the fix named."""

import pytest
import torch

# Each case's in-process run must leave no child process behind (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("no_child_left")

# A user's environment module in the working directory, with an observation space lit_ppo does not support.
TEXT_ENV = """
import gymnasium as gym


class TextEnv(gym.Env):
    observation_space = gym.spaces.Text(8)
    action_space = gym.spaces.Discrete(2)
"""

CASES = [
    (["--data.env_id", "NoSuchEnv-v0"], ["data.env_id", "NoSuchEnv-v0", "registered id"]),
    (["--data.env_id", "lit_ppo_text_env:TextEnv"], ["data.env_id", "Text(", "not supported", "MultiBinary"]),
    (["--data.env_id", "lit_ppo_no_such_pkg.envs:MyEnv"], ["data.env_id", "cannot import", "'lit_ppo_no_such_pkg.envs'"]),
    (["--data.minibatch_size", "100"], ["data.minibatch_size", "must divide", "256"]),
    (["--model.clip_coef", "-0.1"], ["model.clip_coef", "must be positive"]),
    (["--data.num_envs", "0"], ["data.num_envs", "must be positive"]),
    (["--data.gamma", "1.5"], ["data.gamma", "[0, 1]"]),
    (["--data.total_timesteps", "100"], ["data.total_timesteps", "less than one iteration"]),
    (["--data.total_timesteps", "-5"], ["data.total_timesteps", "must be positive"]),
    (["--data.gae_lambda", "-0.1"], ["data.gae_lambda", "[0, 1]"]),
    (["--data.minibatch_size", "512"], ["data.minibatch_size", "must divide"]),
    (["--trainer.gradient_clip_val", "0.3"], ["trainer.gradient_clip_val", "model.max_grad_norm: 0.3"]),
    (["--model.max_grad_norm", "0"], ["model.max_grad_norm", "must be positive or null"]),
    (["--model.activation", "gelu"], ["model.activation", "'gelu'", "tanh"]),
    (["--model.network", "lit_ppo_no_such_pkg.Net"], ["model.network", "cannot import"]),
    (["--model.compile", "fast"], ["model.compile", "'fast'", "reduce-overhead"]),
    (["--model.compile", "true", "--model.recurrent", "{cell: lstm}"], ["model.compile", "model.recurrent",
                                                                     "model.compile: false"]),
    # vector environments (data.vectorization)
    (["--data.vectorization", "synk"], ["data.vectorization", "'synk'", "native"]),
    (["--data.vectorization", "native", "--data.env_id", "Pendulum-v1"], ["'native'", "Pendulum-v1",
                                                                           "no vector implementation"]),
    (["--data.vectorization", "tests.vector_envs.not_a_vector_env"], ["data.vectorization", "not a gymnasium.vector"]),
    (["--data.vectorization", "tests.vector_envs.three_envs"], ["made 3 environments", "data.num_envs is 8"]),
    (["--data.vectorization", "tests.vector_envs.disabled"], ["autoreset mode", "DISABLED"]),
    (["--data.vectorization", "native", "--data.wrappers", "[gymnasium.wrappers.ClipReward]"],
     ["data.wrappers[0]", "not a gymnasium.vector.VectorWrapper"]),
    # Lightning's own checks, in lit_ppo's form
    (["--trainer.devices", "0"], ["trainer.devices", "devices='0'", "positive count"]),
]


@pytest.mark.parametrize("override,expected", CASES, ids=[c[0][0] for c in CASES])
def test_bad_setting_fails_fast_with_a_clear_message(cli_in_process, tmp_path, override, expected):
    (tmp_path / "lit_ppo_text_env.py").write_text(TEXT_ENV)
    proc = cli_in_process("fit", "--config", "cartpole.yaml", *override, cwd=tmp_path)
    assert proc.returncode == 2
    for fragment in expected:
        assert fragment in proc.stderr, (fragment, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "runs/cartpole/checkpoints").exists()


def test_envpool_missing_names_the_extra(cli_in_process, tmp_path):
    pytest.importorskip("gymnasium")
    try:
        import envpool  # noqa: F401
        pytest.skip("EnvPool is installed here")
    except ImportError:
        pass
    proc = cli_in_process("fit", "--config", "cartpole.yaml", "--data.vectorization", "envpool", cwd=tmp_path)
    assert proc.returncode == 2 and "pip install 'lit_ppo[envpool]'" in proc.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_gpu_accelerator_without_a_gpu_names_the_key_and_the_fix(cli_in_process, tmp_path):
    proc = cli_in_process("fit", "--config", "cartpole.yaml", "--trainer.accelerator", "gpu", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "lit_ppo: error: trainer.accelerator:" in proc.stderr and "--trainer.accelerator cpu" in proc.stderr


def test_unknown_logger_class_is_rejected_at_parse_time_naming_the_key(cli_in_process, tmp_path):
    proc = cli_in_process("fit", "--config", "cartpole.yaml", "--trainer.logger",
                          "lightning.pytorch.loggers.NoSuchLogger", cwd=tmp_path)
    assert proc.returncode != 0
    assert "trainer.logger" in proc.stderr and "NoSuchLogger" in proc.stderr
    assert not (tmp_path / "runs").exists()

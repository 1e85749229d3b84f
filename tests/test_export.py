"""``python -m lit_ppo export``: ONNX and TorchScript policies, loaded in a fresh process, act as the module does."""

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

from lit_ppo.tools.export import export
from lit_ppo.learning.module import PPOModule

# Runs in a fresh process with neither lit_ppo nor Lightning imported: what a deployment has.
LOAD_AND_ACT = """
import sys
import numpy as np
import onnxruntime
import torch

obs = np.load("obs.npy")
session = onnxruntime.InferenceSession("policy.onnx", providers=["CPUExecutionProvider"])
signature = [(i.name, i.shape, i.type) for i in session.get_inputs() + session.get_outputs()]
onnx_actions = session.run(["action"], {"obs": obs})[0]
script_actions = torch.jit.load("policy.pt")(torch.from_numpy(obs)).numpy()
stochastic = onnxruntime.InferenceSession("sampling.onnx", providers=["CPUExecutionProvider"])
samples = stochastic.run(["action"], {"obs": np.repeat(obs[:1], 4000, axis=0)})[0]
assert "lit_ppo" not in sys.modules and "lightning" not in sys.modules
np.savez("actions.npz", onnx=onnx_actions, script=script_actions, samples=samples, signature=repr(signature))
"""


def cartpole_observations(n: int = 256) -> np.ndarray:
    """Observations of real CartPole episodes (random actions, several resets)."""
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    env.action_space.seed(0)
    seen = []
    for _ in range(n):
        seen.append(obs)
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    return np.stack(seen).astype(np.float32)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from tests.conftest import run_cli

    for name in ("onnx", "onnxscript", "onnxruntime"):
        pytest.importorskip(name)
    run_dir = tmp_path_factory.mktemp("export")
    run_cli("fit", "--config", "cartpole.yaml", "--data.total_timesteps", "2560", "--trainer.enable_progress_bar",
            "false", cwd=run_dir)
    return run_dir, run_dir / "runs/cartpole/checkpoints/last.ckpt"


def test_onnx_and_torchscript_act_like_the_module_in_a_fresh_process(cli, trained):
    run_dir, ckpt = trained
    out = cli("export", "--ckpt_path", ckpt, "--format", "onnx", "--output", "policy.onnx", cwd=run_dir).stdout
    assert "input 'obs' float32 [batch, 4] -> output 'action' int64 [batch]" in out
    cli("export", "--ckpt_path", ckpt, "--format", "torchscript", "--output", "policy.pt", cwd=run_dir)
    export(ckpt, "onnx", run_dir / "sampling.onnx", deterministic=False)  # --stochastic, in this process
    obs = cartpole_observations()
    np.save(run_dir / "obs.npy", obs)
    subprocess.run([sys.executable, "-c", LOAD_AND_ACT], cwd=run_dir, check=True, timeout=300)
    got = np.load(run_dir / "actions.npz")

    policy = PPOModule.load_from_checkpoint(ckpt, map_location="cpu").policy.eval()
    with torch.no_grad():
        expected, _, _, _ = policy.act(torch.from_numpy(obs), deterministic=True)
        logits, _, _ = policy(torch.from_numpy(obs[:1]))
    assert 0 < expected.sum() < len(expected)  # both actions occur: a real comparison
    np.testing.assert_array_equal(got["onnx"], expected.numpy())
    np.testing.assert_array_equal(got["script"], expected.numpy())
    assert str(got["signature"]) == "[('obs', ['batch', 4], 'tensor(float)'), ('action', ['batch'], 'tensor(int64)')]"
    # --stochastic samples from the policy's distribution (4000 draws: 0.05 is > 6 standard errors).
    assert set(np.unique(got["samples"])) <= {0, 1}
    assert abs(got["samples"].mean() - logits.softmax(-1)[0, 1].item()) < 0.05


def test_unsupported_format_and_missing_checkpoint_are_clear_errors(trained, capsys):
    from lit_ppo.tools.export import main

    run_dir, ckpt = trained
    with pytest.raises(SystemExit) as exit_info:  # argparse's own error
        main(["--ckpt_path", str(ckpt), "--format", "tflite"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "invalid choice: 'tflite'" in err and "onnx" in err
    assert main(["--ckpt_path", "missing.ckpt", "--format", "onnx"]) == 2
    assert "checkpoint not found: missing.ckpt" in capsys.readouterr().err


ACTION_SPACES = {
    "Discrete": gym.spaces.Discrete(3),
    "MultiDiscrete": gym.spaces.MultiDiscrete([3, 2]),
    "MultiBinary": gym.spaces.MultiBinary(3),
    "Box": gym.spaces.Box(-2.0, 2.0, (2,), np.float32),
}


@pytest.mark.parametrize("name", list(ACTION_SPACES))
def test_stochastic_export_samples_the_policy_distribution_for_every_action_space(tmp_path, name):
    """``--stochastic`` for every action space, ONNX and TorchScript: the samples' statistics match the policy's
    own distribution (4000 draws of one observation; the tolerances are > 6 standard errors)."""
    from lit_ppo.networks.actor_critic import ActorCritic
    from lit_ppo.envs.spaces import action_spec, observation_spec, spec_to_dict
    from lit_ppo.tools.export import DeployedPolicy, export_onnx, export_torchscript, run_exported

    pytest.importorskip("onnxruntime")
    obs_space, space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32), ACTION_SPACES[name]
    env_spec = {"env_id": name, "observation": spec_to_dict(observation_spec(obs_space)),
                "action": spec_to_dict(action_spec(space))}
    torch.manual_seed(0)
    policy = ActorCritic.from_env_spec(env_spec).eval()
    with torch.no_grad():
        if policy.log_std is not None:
            policy.log_std.fill_(-1.0)  # a std of exp(-1), not the initial 1: the test can tell them apart
        example = torch.rand(2, 3)
        params, _, _ = policy(example[:1])
        model = DeployedPolicy(policy, deterministic=False).eval()
        export_onnx(model, example, tmp_path / "policy.onnx")
        export_torchscript(model, example, tmp_path / "policy.pt")
        many = example[:1].repeat(4000, 1)
        for fmt, path in (("onnx", tmp_path / "policy.onnx"), ("torchscript", tmp_path / "policy.pt")):
            samples = run_exported(path, fmt, many).double()
            assert samples.shape == (4000, *space.shape), fmt
            if name == "Box":
                mean, log_std = params[0].double().chunk(2)
                torch.testing.assert_close(samples.mean(0), mean, atol=0.03, rtol=0)
                torch.testing.assert_close(samples.std(0), log_std.exp(), atol=0.03, rtol=0)
            elif name == "MultiBinary":
                torch.testing.assert_close(samples.mean(0), params[0].double().sigmoid(), atol=0.05, rtol=0)
            else:
                nvec = [space.n] if name == "Discrete" else list(space.nvec)
                columns = samples.view(4000, -1)
                for i, logits in enumerate(params[0].double().split(nvec)):
                    frequencies = torch.bincount(columns[:, i].long(), minlength=len(logits)).double() / 4000
                    torch.testing.assert_close(frequencies, logits.softmax(-1), atol=0.05, rtol=0)

"""``python -m lit_ppo export``: ONNX and TorchScript policies, loaded in a fresh process, act as the module does."""

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

from lit_ppo.tools.export import export
from lit_ppo.module import PPOModule

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
        expected, _, _ = policy.act(torch.from_numpy(obs), deterministic=True)
        logits, _ = policy(torch.from_numpy(obs[:1]))
    assert 0 < expected.sum() < len(expected)  # both actions occur: a real comparison
    np.testing.assert_array_equal(got["onnx"], expected.numpy())
    np.testing.assert_array_equal(got["script"], expected.numpy())
    assert str(got["signature"]) == "[('obs', ['batch', 4], 'tensor(float)'), ('action', ['batch'], 'tensor(int64)')]"
    # --stochastic samples from the policy's distribution (4000 draws: 0.05 is > 6 standard errors).
    assert set(np.unique(got["samples"])) <= {0, 1}
    assert abs(got["samples"].mean() - logits.softmax(-1)[0, 1].item()) < 0.05


def test_unsupported_format_and_missing_checkpoint_are_clear_errors(cli, trained):
    run_dir, ckpt = trained
    proc = cli("export", "--ckpt_path", ckpt, "--format", "tflite", cwd=run_dir, check=False)
    assert proc.returncode == 2 and "invalid choice: 'tflite'" in proc.stderr and "onnx" in proc.stderr
    proc = cli("export", "--ckpt_path", "missing.ckpt", "--format", "onnx", cwd=run_dir, check=False)
    assert proc.returncode == 2 and "checkpoint not found: missing.ckpt" in proc.stderr
    assert "Traceback" not in proc.stderr

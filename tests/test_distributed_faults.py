"""Faults in multi-process runs, for real: 2 gloo processes (Lightning's DDP launcher, and torchrun as two nodes),
a signal to one rank only, an environment that fails on one rank only."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from tests.conftest import REPO

DDP = ["--config", "cartpole.yaml", "--trainer.enable_progress_bar", "false", "--trainer.logger", "false",
       "--trainer.strategy", "ddp", "--trainer.devices", "2"]
FAULTY = "tests.faulty_envs:LitPPOTest/Faulty-v0"


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    return dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=path, **extra)


def _popen(args, cwd, **extra_env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "lit_ppo", *args], cwd=cwd, env=_env(**extra_env),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no checkpoint appeared"
        time.sleep(0.05)


def test_sigterm_to_rank_0_only_stops_both_ranks_after_the_same_rollout(tmp_path):
    # Lightning's DDP launcher: the process started here is rank 0, rank 1 its child; only rank 0 gets the signal.
    proc = _popen(["fit", *DDP, "--data.total_timesteps", str(4000 * 512)], tmp_path)
    last = tmp_path / "runs/cartpole/checkpoints/last.ckpt"
    _wait_for(last, proc)  # the first periodic save (iteration 10)
    first_step = torch.load(last, weights_only=False)["global_step"]
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert "saved" in out and "--ckpt_path last" in out, out
    assert "Traceback" not in out and "Connection closed" not in out, out
    state = torch.load(last, weights_only=False)
    assert first_step < state["global_step"] < 4000 * 20 and state["global_step"] % 20 == 0
    # Both ranks' rollout streams are in it, at the same iteration.
    ranks = state["PPODataModule"]["ranks"]  # Lightning saves a data module's state under its class name
    assert [r["collector"]["iterations"] for r in ranks] == [state["epoch"] + 1] * 2


def test_an_environment_failing_on_rank_1_only_stops_every_rank_with_one_error_line(tmp_path):
    # Sub-environment 2 of rank 1 (first reset with seed 1 + 1 * 8 + 2) raises at its 40th step (iteration 2).
    proc = _popen(["fit", *DDP, "--data.env_id", FAULTY, "--data.total_timesteps", str(10 * 512)], tmp_path,
                  LIT_PPO_TEST_RAISE_AT="40", LIT_PPO_TEST_FAULTY_SEED="11")
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 2, out
    errors = [line for line in out.splitlines() if line.startswith("lit_ppo: error:")]
    assert len(errors) == 1, out
    assert "on rank 1, sub-environment 2 at its step 40" in errors[0] and "simulated simulator crash" in errors[0]
    for noise in ("Traceback", "Connection closed", "terminate called"):
        assert noise not in out, out

"""EnvPool as ``data.vectorization: envpool``: a real EnvPool CartPole (next-step autoreset, seeded when made,
not picklable) trains, evaluates and resumes through the CLI. Skipped where EnvPool is not installed."""

import csv
import math

import pytest
import torch

pytest.importorskip("envpool")

ARGS = ["--config", "cartpole.yaml", "--data.vectorization", "envpool", "--trainer.enable_progress_bar", "false",
        "--trainer.logger", "lightning.pytorch.loggers.CSVLogger", "--trainer.logger.save_dir", "logs",
        "--data.total_timesteps", str(12 * 256), "--data.eval_episodes", "4",
        "--trainer.check_val_every_n_epoch", "6"]


def test_envpool_cartpole_trains_evaluates_and_resumes_with_a_seeded_reset(cli, cli_in_process, tmp_path):
    proc = cli_in_process("fit", *ARGS, "--trainer.max_epochs", "6", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    proc = cli("fit", *ARGS, "--ckpt_path", "last", cwd=tmp_path)  # a fresh process, as a resumed job is
    assert "could not be saved" in proc.stderr and "reset with a seed derived from" in proc.stderr
    rows = []
    for metrics in sorted(tmp_path.glob("logs/*/version_*/metrics.csv")):
        rows += list(csv.DictReader(metrics.open()))
    steps = [float(r["time/env_steps"]) for r in rows if r["time/env_steps"]]
    assert steps == [256.0 * i for i in range(1, 13)]  # the resumed run goes on from iteration 7
    assert all(math.isfinite(float(r["losses/value"])) for r in rows if r["losses/value"])
    assert len([r for r in rows if r.get("eval/return_mean")]) == 2
    assert torch.load(tmp_path / "runs/cartpole/checkpoints/last.ckpt", weights_only=False)["global_step"] == 12 * 20

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


def test_breakout_envpool_config_trains_end_to_end(cli_in_process, tmp_path):
    """configs/breakout_envpool.yaml as shipped (EnvPool's Atari preprocessing, the Nature CNN), two short
    rollouts; its speed against breakout.yaml is benchmarks/archive/atari_envpool.py's."""
    proc = cli_in_process("fit", "--config", "breakout_envpool.yaml", "--data.num_steps", "16",
                          "--data.minibatch_size", "64", "--data.total_timesteps", str(2 * 8 * 16),
                          "--trainer.enable_progress_bar", "false", "--trainer.logger", "false",
                          "--trainer.limit_val_batches", "0", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    state = torch.load(tmp_path / "runs/breakout_envpool/checkpoints/last.ckpt", weights_only=False)
    assert state["global_step"] == 2 * 4 * 2  # 2 rollouts x 4 epochs x 2 minibatches
    assert state["hyper_parameters"]["env_spec"]["observation"]["shape"] == [4, 84, 84]
    # the Nature CNN's first layer: 32 filters of 8x8 over the 4 stacked frames
    assert state["state_dict"]["policy.encoder.cnns.0.0.weight"].shape == (32, 4, 8, 8)
    # export builds its example observations from EnvPool (Breakout-v5 is no gymnasium id)
    from lit_ppo.tools.export import export

    signature = export(tmp_path / "runs/breakout_envpool/checkpoints/last.ckpt", "torchscript", tmp_path / "p.pt")
    assert "input 'obs' uint8 [batch, 4, 84, 84]" in signature

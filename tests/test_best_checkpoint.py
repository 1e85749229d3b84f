"""The shipped configs keep ``best.ckpt`` by the deterministic evaluation's return (``eval/return_mean``), not by the
training episodes' return: a real fit through the CLI, its logged evaluations, and the checkpoint it kept.

Evaluations every 3 iterations and ``last.ckpt`` every 2: Lightning's ``ModelCheckpoint`` alone would consider the
monitor only at multiples of ``every_n_epochs`` and skip the evaluations at iterations 3, 9, 15 and 21."""

import csv
from pathlib import Path

import pytest
import torch

from lit_ppo.cli import CONFIG_DIR

EPISODES = 5
FIT = ["--config", "cartpole.yaml", "--seed_everything", "3", "--trainer.enable_progress_bar", "false",
       "--data.total_timesteps", str(24 * 256), "--data.eval_episodes", str(EPISODES),
       "--trainer.check_val_every_n_epoch", "3", "--trainer.callbacks.init_args.every_n_epochs", "2"]


def csv_logger(save_dir: str) -> list[str]:
    return ["--trainer.logger", "lightning.pytorch.loggers.CSVLogger", "--trainer.logger.save_dir", save_dir]


def evaluations(metrics: Path) -> list[tuple[float, float]]:
    """(env steps, eval/return_mean) of every evaluation in a CSVLogger's metrics.csv."""
    return [(float(r["step"]), float(r["eval/return_mean"])) for r in csv.DictReader(metrics.open())
            if r.get("eval/return_mean")]


def test_best_ckpt_holds_the_best_evaluation_and_validates_to_it(cli_in_process, tmp_path):
    def cli(*args, cwd):  # in this process: what is under test is the files, not the process
        proc = cli_in_process(*args, cwd=cwd)
        assert proc.returncode == 0, proc.stderr[-3000:]

    cli("fit", *FIT, *csv_logger("fit_logs"), cwd=tmp_path)
    [metrics] = tmp_path.glob("fit_logs/*/version_0/metrics.csv")
    evals = evaluations(metrics)
    assert len(evals) == 8  # 24 iterations, an evaluation every 3
    returns = [r for _, r in evals]
    assert len(set(returns)) > 1, "the test needs evaluations that differ"
    best_step, best_return = next(e for e in evals if e[1] == max(returns))  # the first of equals: saved on improvement
    best = torch.load(tmp_path / "runs/cartpole/checkpoints/best.ckpt", weights_only=False)
    assert best["lit_ppo_env_steps"] == best_step
    [state] = [v for k, v in best["callbacks"].items() if k.startswith("PeriodicCheckpoint")]
    assert state["monitor"] == "eval/return_mean" and float(state["best_model_score"]) == pytest.approx(best_return)
    # the same evaluation (same seeds, deterministic policy) of the kept policy gives the same return
    cli("validate", *FIT, *csv_logger("validate_logs"), "--ckpt_path", "runs/cartpole/checkpoints/best.ckpt",
        cwd=tmp_path)
    [validated] = evaluations(next(tmp_path.glob("validate_logs/*/version_0/metrics.csv")))
    assert validated == (best_step, pytest.approx(best_return))


def test_every_shipped_config_keeps_best_by_evaluation():
    for path in sorted(CONFIG_DIR.glob("*.yaml")):
        text = path.read_text()
        assert "monitor: eval/return_mean" in text and "rollout/return_mean" not in text, path.name


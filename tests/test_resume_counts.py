"""A resumed run counts environment steps from the checkpoint's count, whatever its number of environments, steps
or ranks: the logged ``time/env_steps``, the budget (annealing and the stop) and ``time/sps`` continue from it."""

import csv

import pytest
import torch

from tests.conftest import run_cli

BASE = ["--config", "cartpole.yaml", "--trainer.enable_progress_bar", "false", "--data.total_timesteps", "2048",
        "--trainer.logger", "lightning.pytorch.loggers.CSVLogger", "--trainer.logger.save_dir", "logs"]
LAST = "runs/cartpole/checkpoints/last.ckpt"


def logged(tmp_path, version: int) -> list[dict[str, float]]:
    rows = csv.DictReader((tmp_path / f"logs/cartpole/version_{version}/metrics.csv").open())
    return [{key: float(r[key]) for key in ("time/env_steps", "time/sps", "stats/lr")} for r in rows
            if r.get("time/env_steps")]


def check_continued(rows: list[dict[str, float]], per_rollout: int) -> None:
    """The resumed rows continue from the checkpoint's 1024 steps to the budget, 2048, with the budget's lr."""
    steps = list(range(1024 + per_rollout, 2049, per_rollout))
    assert [r["time/env_steps"] for r in rows] == steps  # before: from iterations x the new rollout size
    assert all(r["time/sps"] > 0 for r in rows), rows  # before: negative below the checkpoint's count
    # cartpole.yaml anneals lr 1e-3 over the budget: half of it is left at the checkpoint's 1024 steps
    expected = [1e-3 * (1 - (s - per_rollout) / 2048) for s in steps]
    assert [r["stats/lr"] for r in rows] == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("change, per_rollout", [
    (["--data.num_envs", "4", "--data.minibatch_size", "128"], 128),
    (["--data.num_steps", "16", "--data.minibatch_size", "128"], 128),
    (["--data.num_envs", "4", "--data.minibatch_size", "128", "--data.vectorization", "async"], 128),
    (["--data.num_envs", "16", "--data.overlap", "true"], 512),
], ids=["fewer-envs", "fewer-steps", "async", "overlap"])
def test_a_resume_with_another_rollout_size_continues_the_step_count(cli_in_process, tmp_path, change, per_rollout):
    overlap = ["--data.overlap", "true"] if "--data.overlap" in change else []

    def fit(*args):  # in this process where it starts no other (quicker); env workers or a collector: a fresh one
        if "async" in change or overlap:
            return run_cli("fit", *BASE, *args, cwd=tmp_path)
        proc = cli_in_process("fit", *BASE, *args, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]

    fit(*overlap, "--trainer.max_epochs", "4")  # 4 x 8 envs x 32 steps
    assert torch.load(tmp_path / LAST, weights_only=False)["lit_ppo_env_steps"] == 1024
    fit(*change, "--ckpt_path", "last")
    check_continued(logged(tmp_path, 1), per_rollout)
    state = torch.load(tmp_path / LAST, weights_only=False)
    assert state["lit_ppo_env_steps"] == 2048
    assert state["PPODataModule"]["ranks"][0]["collector"]["env_steps"] == 2048


def test_a_resume_on_two_ranks_continues_the_step_count_of_one(tmp_path):
    run_cli("fit", *BASE, "--trainer.max_epochs", "4", cwd=tmp_path)
    run_cli("fit", *BASE, "--trainer.strategy", "ddp", "--trainer.devices", "2", "--ckpt_path", "last", cwd=tmp_path)
    check_continued(logged(tmp_path, 1), 512)  # before: 2560 (5 x 512), one rollout, lr 0
    state = torch.load(tmp_path / LAST, weights_only=False)
    assert state["lit_ppo_env_steps"] == 2048
    assert [r["collector"]["env_steps"] for r in state["PPODataModule"]["ranks"]] == [2048, 2048]


def test_a_resume_with_no_rollout_left_in_the_budget_is_refused(cli_in_process, tmp_path):
    from tests.test_error_paths import one_error, sha

    args = ["fit", *BASE, "--data.total_timesteps", "1024", "--trainer.logger", "false"]
    assert cli_in_process(*args, cwd=tmp_path).returncode == 0
    digest = sha(tmp_path / LAST)
    proc = cli_in_process(*args, "--ckpt_path", "last", cwd=tmp_path)  # before: one more rollout, past the budget
    one_error(proc, "data.total_timesteps: the checkpoint has done 1024 environment steps of the budget 1024",
              "raise data.total_timesteps")
    assert sha(tmp_path / LAST) == digest

"""Loggers chosen in the config, several at once, read back with each library's own reader."""

import csv
import json
import shutil
import subprocess

import pytest
import yaml

from tests.conftest import TB_AND_CSV_LOGGERS_YAML

SMALL = ["--data.total_timesteps", "2560", "--trainer.enable_progress_bar", "false", "--model.lr", "3e-4",
         "--trainer.check_val_every_n_epoch", "5", "--data.eval_episodes", "2"]
ROLLOUTS = 10  # 2560 steps / (8 envs x 32 steps)
ENV_STEPS = [256 * (i + 1) for i in range(ROLLOUTS)]  # the step axis of every metric
EVAL_STEPS = [1280, 2560]  # evaluations after rollouts 5 and 10

LOGGERS_YAML = TB_AND_CSV_LOGGERS_YAML + """\
    - class_path: lightning.pytorch.loggers.MLFlowLogger
      init_args: {experiment_name: cartpole, tracking_uri: "sqlite:///mlflow.db"}
"""


@pytest.fixture(scope="module")
def three_loggers_run(tmp_path_factory):
    from tests.conftest import run_cli

    for name in ("mlflow", "imageio_ffmpeg", "moviepy"):
        pytest.importorskip(name)
    run_dir = tmp_path_factory.mktemp("loggers")
    (run_dir / "loggers.yaml").write_text(LOGGERS_YAML)
    # With evaluation videos, which MLflow takes as run artifacts (tests/test_callbacks.py checks the rest).
    video = ["--trainer.callbacks+=lit_ppo.callbacks.EvaluationVideo", "--trainer.callbacks.max_frames", "10",
             "--trainer.callbacks.every_n_iterations", "5"]
    run_cli("fit", "--config", "cartpole.yaml", "--config", "loggers.yaml", *SMALL, *video, cwd=run_dir)
    return run_dir


def test_tensorboard_scalars_and_hparams(three_loggers_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    [version] = list((three_loggers_run / "logs/tb").glob("version_*"))
    events = EventAccumulator(str(version))
    events.Reload()
    returns = events.Scalars("rollout/return_mean")
    assert len(returns) == ROLLOUTS and all(e.value > 0 for e in returns)
    assert [e.step for e in returns] == [e.value for e in events.Scalars("time/env_steps")] == ENV_STEPS
    assert [e.step for e in events.Scalars("eval/return_mean")] == EVAL_STEPS
    content = events.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    hparams = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info.hparams
    assert hparams["lr"].number_value == pytest.approx(3e-4)
    assert hparams["env_id"].string_value == "CartPole-v1"  # the data module's hyperparameters too


def test_csv_metrics_and_hparams(three_loggers_run):
    [version] = list((three_loggers_run / "logs/csv").glob("version_*"))
    every = list(csv.DictReader((version / "metrics.csv").open()))
    rows = [r for r in every if r["time/env_steps"]]
    assert [int(r["step"]) for r in rows] == [float(r["time/env_steps"]) for r in rows] == ENV_STEPS
    assert [int(r["step"]) for r in every if r["eval/return_mean"]] == EVAL_STEPS
    hparams = yaml.safe_load((version / "hparams.yaml").read_text())
    assert hparams["lr"] == 3e-4 and hparams["total_timesteps"] == 2560


def test_mlflow_local_store_metrics_and_params(three_loggers_run):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{three_loggers_run / 'mlflow.db'}")
    [run] = client.search_runs([client.get_experiment_by_name("cartpole").experiment_id])
    assert float(run.data.params["lr"]) == 3e-4
    assert run.data.params["env_id"] == "CartPole-v1"
    history = client.get_metric_history(run.info.run_id, "rollout/return_mean")
    assert len(history) == ROLLOUTS and all(m.value > 0 for m in history)
    assert run.data.metrics["time/env_steps"] == 2560
    assert [m.step for m in client.get_metric_history(run.info.run_id, "eval/return_mean")] == EVAL_STEPS
    artifacts = [a.path for a in client.list_artifacts(run.info.run_id, "videos")]
    assert sorted(artifacts) == ["videos/iter00005.mp4", "videos/iter00010.mp4"]


def test_wandb_offline(cli, tmp_path):
    pytest.importorskip("wandb")
    if shutil.which("wandb") is None or subprocess.run(["wandb", "leet", "inspect", "--help"],
                                                       capture_output=True).returncode != 0:
        pytest.skip("this wandb has no `wandb leet inspect` reader")
    cli("fit", "--config", "cartpole.yaml", *SMALL, "--trainer.logger", "lightning.pytorch.loggers.WandbLogger",
        "--trainer.logger.offline", "true", "--trainer.logger.save_dir", "wb", "--trainer.logger.project", "lit_ppo",
        cwd=tmp_path)
    [run_dir] = list((tmp_path / "wb/wandb").glob("offline-run-*"))
    # W&B's own reader of the run's transaction log.
    summary = subprocess.run(["wandb", "leet", "inspect", "--summary", "--json", str(run_dir)],
                             capture_output=True, text=True, check=True, timeout=120).stdout
    summary = json.loads(summary)
    assert summary["state"] == "finished"
    assert summary["config"]["lr"] == 3e-4 and summary["config"]["env_id"] == "CartPole-v1"
    assert summary["summary"]["time/env_steps"] == 2560
    assert summary["summary"]["rollout/return_mean"] > 0


def test_plot_draws_evaluations_at_the_env_steps_they_followed(three_loggers_run):
    pytest.importorskip("matplotlib")
    from lit_ppo.tools.plot import curve, find_runs, read_run

    for logs in ("logs/csv", "logs/tb"):
        [run] = find_runs(three_loggers_run / logs)
        scalars = read_run(run)
        assert curve(scalars, "eval/return_mean")[0].tolist() == EVAL_STEPS
        assert curve(scalars, "rollout/return_mean")[0].tolist() == ENV_STEPS

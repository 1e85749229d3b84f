"""Stopping and resuming is a non-event: exact resume, kills, signals, bad checkpoints and faults.

Everything runs through the CLI in fresh processes with real checkpoint files."""

import csv
import hashlib
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import fsspec.implementations.local
import lightning as L
import pytest
import torch

from lit_ppo import PPODataModule, PPOModule
from lit_ppo.checkpointing.files import CheckpointError
from tests.conftest import wait_for_file

BASE = ["--config", "cartpole.yaml", "--trainer.enable_progress_bar", "false"]
FAULTY = "tests.faulty_envs:LitPPOTest/Faulty-v0"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def returns_by_step(run_dir: Path) -> list[tuple[str, str]]:
    rows = []
    for metrics in sorted(run_dir.glob("*/version_*/metrics.csv")):
        rows += [(r["time/env_steps"], r["rollout/return_mean"]) for r in csv.DictReader(metrics.open())
                 if r.get("time/env_steps")]
    return rows


def _csv(save_dir):
    return ["--trainer.logger", "lightning.pytorch.loggers.CSVLogger", "--trainer.logger.save_dir", save_dir]


def test_stop_and_resume_is_bit_identical_to_one_run(cli, tmp_path):
    budget = ["--data.total_timesteps", str(12 * 256)]
    cli("fit", *BASE, *budget, *_csv("full"), "--trainer.callbacks.init_args.dirpath", "full/ckpt", cwd=tmp_path)
    cli("fit", *BASE, *budget, *_csv("part"), "--trainer.callbacks.init_args.dirpath", "part/ckpt",
        "--trainer.max_epochs", "5", cwd=tmp_path)
    assert torch.load(tmp_path / "part/ckpt/last.ckpt", weights_only=False)["global_step"] == 5 * 20
    cli("fit", *BASE, *budget, *_csv("part"), "--trainer.callbacks.init_args.dirpath", "part/ckpt",
        "--ckpt_path", "last", cwd=tmp_path)
    full = torch.load(tmp_path / "full/ckpt/last.ckpt", weights_only=False)
    part = torch.load(tmp_path / "part/ckpt/last.ckpt", weights_only=False)
    assert full["global_step"] == part["global_step"] == 12 * 20
    for key, value in full["state_dict"].items():
        assert torch.equal(value, part["state_dict"][key]), key
    for key in ("exp_avg", "exp_avg_sq"):
        for i, state in full["optimizer_states"][0]["state"].items():
            assert torch.equal(state[key], part["optimizer_states"][0]["state"][i][key])
    logged_full, logged_part = returns_by_step(tmp_path / "full"), returns_by_step(tmp_path / "part")
    assert len(logged_full) == 12 and logged_part == logged_full


def _popen(args, cwd):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "lit_ppo", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def test_last_ckpt_is_written_every_period_whether_or_not_the_return_improved(cli_in_process, tmp_path):
    # The Faulty env's rewards are its random actions: the monitored return goes up and down.
    proc = cli_in_process("fit", *BASE, "--data.env_id", FAULTY, "--data.total_timesteps", str(8 * 256),
                          "--trainer.logger", "false", "--trainer.callbacks.init_args.every_n_epochs", "1",
                          "--trainer.callbacks+=tests.ddp_probe.LastCheckpointProbe", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # at the start of iterations 2..8: the state after the iteration before (20 updates each)
    assert torch.load(tmp_path / "last_ckpt_steps.pt") == [20 * i for i in range(1, 8)]


def test_sigkill_then_resume_continues_from_the_saved_step(cli, tmp_path):
    args = ["fit", *BASE, "--data.total_timesteps", str(60 * 256), *_csv("logs"),
            "--trainer.callbacks.init_args.every_n_epochs", "2"]
    proc = _popen(args, tmp_path)
    last = tmp_path / "runs/cartpole/checkpoints/last.ckpt"
    wait_for_file(last, proc)
    time.sleep(0.3)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    saved_step = torch.load(last, weights_only=False)["global_step"]
    assert 0 < saved_step < 60 * 20 and saved_step % 40 == 0  # a rollout boundary, every 2 iterations
    cli(*args, "--ckpt_path", "last", cwd=tmp_path)
    assert torch.load(last, weights_only=False)["global_step"] == 60 * 20
    versions = sorted((tmp_path / "logs").glob("*/version_*/metrics.csv"))
    resumed = [r for r in csv.DictReader(versions[-1].open()) if r.get("time/env_steps")]
    # the resumed run's first iteration is the one after the checkpoint: no steps repeated, none skipped
    assert float(resumed[0]["time/env_steps"]) == (saved_step // 20 + 1) * 256


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_sigterm_and_sigint_save_last_ckpt_at_a_rollout_boundary_before_exit(tmp_path, sig):
    args = ["fit", *BASE, "--data.total_timesteps", str(2000 * 256), "--trainer.logger", "false"]
    proc = _popen(args, tmp_path)
    last = tmp_path / "runs/cartpole/checkpoints/last.ckpt"
    wait_for_file(last, proc)  # the first periodic save (iteration 10)
    first_step = torch.load(last, weights_only=False)["global_step"]
    time.sleep(0.5)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert "saved" in out and "--ckpt_path last" in out
    state = torch.load(last, weights_only=False)
    assert state["global_step"] > first_step and state["global_step"] % 20 == 0
    assert state["global_step"] < 2000 * 20


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A short CartPole run's last.ckpt (4 iterations) and its hash; tests that use it must leave it as it is."""
    from tests.conftest import run_cli

    run_dir = tmp_path_factory.mktemp("trained")
    run_cli("fit", *BASE, "--data.total_timesteps", "1024", "--trainer.logger", "false", cwd=run_dir)
    ckpt = run_dir / "runs/cartpole/checkpoints/last.ckpt"
    return ckpt, sha(ckpt)


def _fails_cleanly(proc, *fragments):
    assert proc.returncode != 0
    for fragment in fragments:
        assert fragment in proc.stderr, (fragment, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]


@pytest.mark.parametrize("command", ["fit", "validate"])
def test_checkpoint_of_another_environment_is_named_before_training(cli_in_process, tmp_path, trained, command):
    ckpt, digest = trained
    proc = cli_in_process(command, *BASE, "--data.env_id", "Acrobot-v1", "--ckpt_path", ckpt, "--trainer.logger",
                          "false", cwd=tmp_path)
    # the environment is named first (not a setting that follows from it, such as its spaces or statistics)
    _fails_cleanly(proc, str(ckpt), "trained on 'CartPole-v1'", "sets data.env_id 'Acrobot-v1'")
    assert sha(ckpt) == digest


def test_checkpoint_of_another_environment_resumed_as_last_names_the_spaces(cli_in_process, tmp_path, trained):
    # `--ckpt_path last` continues this config's run: the config decides, and a checkpoint that does not fit is named
    ckpt, digest = trained
    (tmp_path / "runs/cartpole/checkpoints").mkdir(parents=True)
    (tmp_path / "runs/cartpole/checkpoints/last.ckpt").write_bytes(ckpt.read_bytes())
    proc = cli_in_process("fit", *BASE, "--data.env_id", "Acrobot-v1", "--ckpt_path", "last", "--trainer.logger",
                          "false", cwd=tmp_path)
    _fails_cleanly(proc, "observation space", "[4]", "[6]", "action space")
    assert sha(ckpt) == digest


def test_checkpoint_of_another_network_is_named(tmp_path, trained):
    ckpt, digest = trained
    dm = PPODataModule("CartPole-v1", num_envs=8, num_steps=32, minibatch_size=256)
    model = PPOModule(env_spec=dm.env_spec, hidden_sizes=[32])
    trainer = L.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False)
    with pytest.raises(CheckpointError, match=r"hidden sizes.*\[64, 64\].*\[32\]"):
        trainer.validate(model, dm, ckpt_path=ckpt, verbose=False)
    assert sha(ckpt) == digest


@pytest.mark.parametrize("ckpt_path", ["file", "last"])
def test_resuming_with_another_network_is_refused_from_a_file_as_from_last(cli_in_process, tmp_path, trained,
                                                                           ckpt_path):
    ckpt, digest = trained
    (tmp_path / "runs/cartpole/checkpoints").mkdir(parents=True)
    (tmp_path / "runs/cartpole/checkpoints/last.ckpt").write_bytes(ckpt.read_bytes())
    proc = cli_in_process("fit", *BASE, "--model.hidden_sizes", "[32]", "--trainer.logger", "false",
                          "--ckpt_path", ckpt if ckpt_path == "file" else "last", cwd=tmp_path)
    _fails_cleanly(proc, "does not fit this run", "hidden sizes (model.hidden_sizes): checkpoint [64, 64], this run [32]")
    assert sha(ckpt) == sha(tmp_path / "runs/cartpole/checkpoints/last.ckpt") == digest


def test_settings_a_checkpoint_file_replaces_are_said_once(cli_in_process, tmp_path, trained):
    ckpt, _ = trained
    proc = cli_in_process("validate", *BASE, "--model.lr", "0.0005", "--data.eval_episodes", "2", "--ckpt_path",
                          ckpt, "--trainer.logger", "false", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    [said] = [line for line in proc.stderr.splitlines() if line.startswith("lit_ppo: settings from")]
    assert "model.lr: 0.001 (not 0.0005)" in said and "hidden_sizes" not in said


def test_a_checkpoint_file_brings_its_normalization_settings_and_refuses_others(cli_in_process, tmp_path, trained):
    """cartpole.yaml trains without normalization (the package defaults normalize observations and scale the
    critic's targets): validating its checkpoint without the config takes the checkpoint's settings (its policy has
    no statistics to load); asking for another is an error naming the setting, as the defaults resolve it."""
    ckpt, digest = trained
    proc = cli_in_process("validate", "--ckpt_path", ckpt, "--data.eval_episodes", "2", "--trainer.logger", "false",
                          "--trainer.enable_progress_bar", "false", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    [said] = [line for line in proc.stderr.splitlines() if line.startswith("lit_ppo: settings from")]
    assert "data.normalize_obs: False (not True)" in said and "data.return_scaling: False (not True)" in said
    assert "data.normalize_reward" not in said  # off in both
    (tmp_path / "normalized").mkdir()
    fit = cli_in_process("fit", "--data.num_steps", "16", "--data.total_timesteps", "64", "--trainer.logger", "false",
                         "--trainer.enable_progress_bar", "false", cwd=tmp_path / "normalized")
    assert fit.returncode == 0, fit.stderr
    normalized = tmp_path / "normalized/checkpoints/last.ckpt"
    proc = cli_in_process("validate", "--ckpt_path", normalized, "--data.normalize_obs", "false", cwd=tmp_path)
    _fails_cleanly(proc, "was trained with data.normalize_obs: True", "Drop --data.normalize_obs")
    # setting data.normalize_reward turns the default return scaling off: that checkpoint scaled returns
    proc = cli_in_process("validate", "--ckpt_path", normalized, "--data.normalize_reward", "true", cwd=tmp_path)
    _fails_cleanly(proc, "was trained with data.normalize_reward: False, and this run sets True")
    assert sha(ckpt) == digest


def test_a_new_run_refuses_a_checkpoint_directory_holding_an_earlier_runs(cli_in_process, trained):
    ckpt, digest = trained
    before = {p.name: sha(p) for p in ckpt.parent.iterdir()}
    proc = cli_in_process("fit", *BASE, "--data.total_timesteps", "1024", "--trainer.logger", "false",
                          cwd=ckpt.parents[3])
    _fails_cleanly(proc, "trainer.callbacks: ModelCheckpoint dirpath", "already holds an earlier run's checkpoints",
                   "last.ckpt", "--ckpt_path last")
    assert {p.name: sha(p) for p in ckpt.parent.iterdir()} == before and sha(ckpt) == digest


def test_resuming_with_max_epochs_below_the_checkpoint_names_the_key(cli_in_process, tmp_path, trained):
    ckpt, digest = trained
    proc = cli_in_process("fit", *BASE, "--trainer.max_epochs", "2", "--ckpt_path", ckpt, "--trainer.logger",
                          "false", cwd=tmp_path)
    _fails_cleanly(proc, "lit_ppo: error: trainer.max_epochs: 2 is below the checkpoint's 4 iterations done",
                   "-1 to train to data.total_timesteps")
    assert sha(ckpt) == digest


@pytest.mark.parametrize("kind", ["missing", "empty", "corrupt", "truncated"])
def test_unusable_checkpoint_file_is_named_without_a_traceback(cli_in_process, tmp_path, trained, kind):
    ckpt, digest = trained
    bad = tmp_path / f"{kind}.ckpt"
    if kind == "empty":
        bad.write_bytes(b"")
    elif kind == "corrupt":
        bad.write_bytes(b"not a checkpoint at all")
    elif kind == "truncated":
        bad.write_bytes(ckpt.read_bytes()[: ckpt.stat().st_size // 2])
    proc = cli_in_process("fit", *BASE, "--ckpt_path", bad, "--trainer.logger", "false", cwd=tmp_path)
    _fails_cleanly(proc, f"{kind}.ckpt", {"missing": "does not exist", "empty": "empty", "corrupt": "corrupt",
                                          "truncated": "corrupt"}[kind])
    assert sha(ckpt) == digest


def _faulty_run(cli, tmp_path, **extra_env):
    """Three clean iterations (checkpoint each), then resume with a fault armed for the fourth."""
    args = ["fit", *BASE, "--data.env_id", FAULTY, "--data.total_timesteps", str(10 * 256), "--trainer.logger",
            "false", "--trainer.callbacks.init_args.every_n_epochs", "1"]
    cli(*args, "--trainer.max_epochs", "3", cwd=tmp_path)
    ckpt = tmp_path / "runs/cartpole/checkpoints/last.ckpt"
    digest = sha(ckpt)
    proc = cli(*args, "--ckpt_path", "last", cwd=tmp_path, check=False, extra_env=extra_env)
    return proc, ckpt, digest


def test_environment_that_raises_is_named_and_the_checkpoint_is_intact(cli, tmp_path):
    # each of the 8 envs takes 32 steps per iteration: step 100 of an env falls in iteration 4; only
    # sub-environment 3 (first reset with seed 1 + 3) is armed
    proc, ckpt, digest = _faulty_run(cli, tmp_path, LIT_PPO_TEST_RAISE_AT="100", LIT_PPO_TEST_FAULTY_SEED="4")
    _fails_cleanly(proc, FAULTY, "rank 0, sub-environment 3 at its step 100 (environment step 800 of this rank)",
                   "step()", "simulated simulator crash")
    assert sha(ckpt) == digest


def test_nan_loss_stops_with_iteration_and_quantity_and_keeps_the_last_good_checkpoint(cli, tmp_path):
    proc, ckpt, digest = _faulty_run(cli, tmp_path, LIT_PPO_TEST_NAN_AT="100")
    _fails_cleanly(proc, "non-finite", "iteration 4", "losses/value", "the rollout's rewards were non-finite")
    assert sha(ckpt) == digest
    state = torch.load(ckpt, weights_only=False)
    assert state["global_step"] == 3 * 20
    assert all(torch.isfinite(v).all() for v in state["state_dict"].values() if v.is_floating_point())


def test_nan_loss_can_skip_the_update_instead(cli, tmp_path):
    args = ["fit", *BASE, "--data.env_id", FAULTY, "--data.total_timesteps", str(6 * 256), *_csv("logs"),
            "--model.on_nonfinite", "skip"]
    cli(*args, cwd=tmp_path, extra_env={"LIT_PPO_TEST_NAN_AT": "40"})
    [metrics] = (tmp_path / "logs").glob("*/version_*/metrics.csv")
    skipped = [float(r["stats/skipped_updates"]) for r in csv.DictReader(metrics.open()) if r.get("time/env_steps")]
    assert sum(skipped) > 0 and skipped[0] == 0  # the NaN reward arrives in iteration 2
    state = torch.load(tmp_path / "runs/cartpole/checkpoints/last.ckpt", weights_only=False)
    assert all(torch.isfinite(v).all() for v in state["state_dict"].values() if v.is_floating_point())


def test_skipping_stops_once_whole_rollouts_are_skipped_in_a_row_and_logs_their_losses_as_nan(cli, tmp_path):
    # NaN rewards from each env's 70th step on (iteration 3): iterations 3, 4 and 5 skip every update.
    args = ["fit", *BASE, "--data.env_id", FAULTY, "--data.total_timesteps", str(10 * 256), *_csv("logs"),
            "--model.on_nonfinite", "skip", "--trainer.callbacks.init_args.every_n_epochs", "1"]
    proc = cli(*args, cwd=tmp_path, check=False, extra_env={"LIT_PPO_TEST_NAN_FROM": "70"})
    _fails_cleanly(proc, "every update of the last 3 rollouts was skipped", "iteration 5",
                   "the rollout's rewards were non-finite", "model.max_skipped_rollouts")
    for iteration in (3, 4):
        assert f"lit_ppo: iteration {iteration}: 20 of 20 updates skipped (non-finite loss)" in proc.stderr
    [metrics] = (tmp_path / "logs").glob("*/version_*/metrics.csv")
    rows = [r for r in csv.DictReader(metrics.open()) if r.get("time/env_steps")]
    assert [float(r["stats/skipped_updates"]) for r in rows] == [0, 0, 20, 20]
    assert [math.isnan(float(r["losses/value"])) for r in rows] == [False, False, True, True]
    # last.ckpt after iteration 4 (the 20 updates of iterations 1 and 2 only), not after the failing iteration 5
    state = torch.load(tmp_path / "runs/cartpole/checkpoints/last.ckpt", weights_only=False)
    assert (state["epoch"], state["global_step"]) == (3, 40)


def test_a_save_that_fails_mid_write_leaves_the_previous_last_ckpt(tmp_path, monkeypatch):
    dm = PPODataModule("CartPole-v1", num_envs=4, num_steps=16, total_timesteps=128, minibatch_size=32)
    model = PPOModule(env_spec=dm.env_spec)
    trainer = L.Trainer(max_epochs=-1, logger=False, enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=tmp_path)
    trainer.fit(model, dm)
    last = tmp_path / "last.ckpt"
    trainer.save_checkpoint(last)
    digest = sha(last)

    real_write = fsspec.implementations.local.LocalFileOpener.write

    def write_half_then_fail(self, data):
        real_write(self, bytes(data)[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fsspec.implementations.local.LocalFileOpener, "write", write_half_then_fail)
    with torch.no_grad():
        next(model.parameters()).add_(1.0)  # a different state, so a partial overwrite would show
    with pytest.raises(OSError, match="No space left"):
        trainer.save_checkpoint(last)
    monkeypatch.undo()
    assert sha(last) == digest
    assert torch.load(last, weights_only=False)["global_step"] == trainer.global_step
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == ["last.ckpt"]  # no temporary file left behind


def test_a_users_config_yaml_in_the_working_directory_is_never_overwritten(cli_in_process, tmp_path, trained):
    """Without a logger Lightning saves the run's config to the working directory: not over the user's own file."""
    mine = tmp_path / "config.yaml"
    mine.write_text("# my CartPole settings, comments and all\ndata:\n  num_steps: 128\n  total_timesteps: 512\n")
    before = mine.read_text()
    kept = "config.yaml was not written by Lightning: it is kept as it is"
    with pytest.warns(UserWarning, match=kept):
        fit = cli_in_process("fit", "--config", "config.yaml", "--trainer.logger", "false", "--trainer.callbacks",
                             "null", "--trainer.enable_progress_bar", "false", cwd=tmp_path)
    assert fit.returncode == 0, fit.stderr
    with pytest.warns(UserWarning, match=kept):
        validate = cli_in_process("validate", "--ckpt_path", trained[0], "--trainer.logger", "false",
                                  "--trainer.enable_progress_bar", "false", cwd=tmp_path)
    assert validate.returncode == 0, validate.stderr
    assert mine.read_text() == before


def test_a_checkpoint_written_before_the_package_had_rooms_still_resumes(cli, tmp_path):
    # tests/data/cartpole_before_layout.ckpt: `fit --config cartpole.yaml --data.total_timesteps 512` at 1d086ba, when
    # lit_ppo was one flat folder; its pickled vector env names lit_ppo.envs.make_env, its callbacks old module paths.
    old = Path(__file__).parent / "data" / "cartpole_before_layout.ckpt"
    before = sha(old)
    saved = torch.load(old, weights_only=False)
    assert saved["global_step"] == 2 * 20
    done = cli("fit", *BASE, "--data.total_timesteps", "1024", *_csv("logs"), "--ckpt_path", str(old),
               "--trainer.callbacks.init_args.dirpath", "ckpt", cwd=tmp_path)
    resumed = torch.load(tmp_path / "ckpt/last.ckpt", weights_only=False)
    assert resumed["global_step"] == 4 * 20, done.stderr
    assert [float(steps) for steps, _ in returns_by_step(tmp_path / "logs")] == [768, 1024]
    # without the config: its env_spec predates data.return_scaling (on by default since), and absent means off
    validate = cli("validate", "--ckpt_path", str(old), "--data.eval_episodes", "2", "--trainer.logger", "false",
                   cwd=tmp_path)
    assert "data.return_scaling: False (not True)" in validate.stderr
    assert sha(old) == before  # read, never written

"""Every error path ends the run with one ``lit_ppo: error:`` line (``lit_ppo <tool>: error:`` for a tool), exit code
2, no traceback, nothing it found changed, and no child process left (async env workers included)."""

import re
from pathlib import Path

import pytest

from tests.conftest import run_cli_alone

pytestmark = pytest.mark.usefixtures("no_child_left")

MASKED = "tests.masked_envs:LitPPOTest/InvalidActions-v0"
FAULTY = "tests.faulty_envs:LitPPOTest/Faulty-v0"
QUIET = ["--trainer.logger", "false", "--trainer.enable_progress_bar", "false"]
ASYNC = ["--data.vectorization", "async", "--data.num_envs", "2", "--data.minibatch_size", "64"]


def one_error(proc, *fragments, code=2, tool=""):
    """The run failed with exactly one error line holding every fragment, and nothing else went wrong."""
    prefix = f"lit_ppo{' ' + tool if tool else ''}: error:"
    lines = [line for line in proc.stderr.splitlines() if re.match(r"lit_ppo( \w+)?: error:", line)]
    assert proc.returncode == code and len(lines) == 1 and lines[0].startswith(prefix), (proc.returncode,
                                                                                         proc.stderr[-3000:])
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return lines[0]


def sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- asynchronous environments: an error ends the run, and its workers with it ------------------------------------
def test_an_error_with_async_envs_ends_the_run_and_its_workers(tmp_path):
    # Before: the error line, then a hang at exit (the workers inherited Lightning's SIGTERM handler).
    proc = run_cli_alone("fit", "--config", "cartpole.yaml", "--data.env_id", MASKED, "--data.action_masks", "method",
                         "--data.env_kwargs", "{bad_mask_at: 5, bad: empty}", *ASYNC, *QUIET, cwd=tmp_path,
                         timeout=90)
    one_error(proc, "sub-environment 0 at its step 5, allows no action:")
    assert "Received SIGTERM" not in proc.stderr


def test_an_async_env_that_raises_is_named_in_one_line(tmp_path):
    proc = run_cli_alone("fit", "--config", "cartpole.yaml", "--data.env_id", FAULTY, *ASYNC, *QUIET, cwd=tmp_path,
                         timeout=90, extra_env={"LIT_PPO_TEST_RAISE_AT": "40"})
    one_error(proc, "raised in step() on rank 0, sub-environment 0 at its step 40", "simulated simulator crash")
    assert "Received the following error from Worker" not in proc.stderr  # gymnasium's own report, traceback and all


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_resuming_with_another_num_envs_continues_on_fresh_environments(tmp_path, vectorization):
    # Before: RuntimeError "The size of tensor a (4) must match ... (8)" from the rollout's running return.
    base = ["fit", "--config", "cartpole.yaml", *QUIET, "--trainer.callbacks.init_args.every_n_epochs", "1"]
    first = run_cli_alone(*base, "--trainer.max_epochs", "2", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    proc = run_cli_alone(*base, "--trainer.max_epochs", "3", "--data.num_envs", "4", "--data.minibatch_size", "128",
                         "--data.vectorization", vectorization, "--ckpt_path", "last", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "data.num_envs is 4 and rank 0 of the checkpoint ran 8 environments; they were reset" in proc.stderr


# -- settings that define a trained policy follow the checkpoint or are refused ------------------------------------
@pytest.fixture(scope="module")
def masked_checkpoint(tmp_path_factory):
    from tests.conftest import run_cli

    run_dir = tmp_path_factory.mktemp("masked")
    run_cli("fit", "--config", "cartpole.yaml", "--data.env_id", MASKED, "--data.action_masks", "method",
            "--data.total_timesteps", "2048", *QUIET, cwd=run_dir)
    ckpt = run_dir / "runs/cartpole/checkpoints/last.ckpt"
    return ckpt, sha(ckpt)


def test_masks_set_off_beside_a_masked_checkpoint_are_refused(cli_in_process, tmp_path, masked_checkpoint):
    # Before: validate ran without masks and reported a much worse return, with no word about it.
    ckpt, digest = masked_checkpoint
    proc = cli_in_process("validate", "--data.env_id", MASKED, "--data.action_masks", "null", "--ckpt_path", ckpt,
                          *QUIET, cwd=tmp_path)
    one_error(proc, "was trained with data.action_masks: 'method'", "sets None", "Drop --data.action_masks")
    assert sha(ckpt) == digest


def test_masks_left_unset_follow_the_checkpoint(cli_in_process, tmp_path, masked_checkpoint):
    ckpt, _ = masked_checkpoint
    proc = cli_in_process("validate", "--data.env_id", MASKED, "--data.eval_episodes", "4", "--ckpt_path", ckpt,
                          *QUIET, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "data.action_masks: 'method' (not None)" in proc.stderr
    # masked, every episode runs its 20 valid steps: the return is 20 (unmasked it was ~4.7)
    assert re.search(r"eval/return_mean\s*│?\s*20\.0", proc.stdout), proc.stdout[-2000:]


def test_predict_without_a_config_takes_the_checkpoints_environment(cli_in_process, tmp_path):
    # The README says predict needs no config; a checkpoint of another environment than the default was refused.
    fit = cli_in_process("fit", "--config", "cartpole.yaml", "--data.env_id", "Acrobot-v1", "--data.total_timesteps",
                         "512", "--data.num_steps", "64", "--data.minibatch_size", "128", *QUIET, cwd=tmp_path)
    assert fit.returncode == 0, fit.stderr[-2000:]
    proc = cli_in_process("predict", "--ckpt_path", "runs/cartpole/checkpoints/last.ckpt", "--data.eval_episodes", "2",
                          "--trainer.enable_progress_bar", "false", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "data.env_id: 'Acrobot-v1' (not 'CartPole-v1')" in proc.stderr and "predict: 2 episodes" in proc.stdout


@pytest.fixture(scope="module")
def recurrent_checkpoint(tmp_path_factory):
    from tests.conftest import run_cli

    run_dir = tmp_path_factory.mktemp("recurrent")
    # `true` is the documented shorthand for the default core (it was refused by the parser before)
    run_cli("fit", "--config", "cartpole.yaml", "--model.recurrent", "true", "--data.total_timesteps", "512",
            "--data.num_steps", "64", "--data.minibatch_size", "128", *QUIET, cwd=run_dir)
    return run_dir / "runs/cartpole/checkpoints/last.ckpt"


def test_recurrent_set_to_null_beside_a_recurrent_checkpoint_is_refused(cli_in_process, tmp_path,
                                                                        recurrent_checkpoint):
    # Before: an explicit null was silently replaced by the checkpoint's core while {hidden_size: 64} was refused.
    for value in ("null", "{hidden_size: 64}"):
        proc = cli_in_process("validate", "--model.recurrent", value, "--ckpt_path", recurrent_checkpoint, *QUIET,
                              cwd=tmp_path)
        one_error(proc, "recurrent core (model.recurrent)", "RecurrentConfig(cell='lstm', hidden_size=128")
    proc = cli_in_process("validate", "--ckpt_path", recurrent_checkpoint, "--data.eval_episodes", "2", *QUIET,
                          cwd=tmp_path)
    assert proc.returncode == 0 and "model.recurrent: RecurrentConfig(cell='lstm'" in proc.stderr, proc.stderr[-2000:]


# -- checkpoints and config files ----------------------------------------------------------------------------------
def test_a_checkpoint_that_turns_corrupt_between_reads_is_named(cli_in_process, tmp_path, masked_checkpoint):
    # The CLI reads the file when it parses; the Trainer reads it again. tests.file_faults.CorruptOnSetup spoils the
    # copy in between (a callback's setup runs before the Trainer restores the checkpoint).
    ckpt = tmp_path / "copy.ckpt"
    ckpt.write_bytes(masked_checkpoint[0].read_bytes())
    proc = cli_in_process("validate", "--data.env_id", MASKED, "--ckpt_path", ckpt, *QUIET, "--trainer.callbacks+",
                          "tests.file_faults.CorruptOnSetup", "--trainer.callbacks.path", str(ckpt), cwd=tmp_path)
    one_error(proc, f"checkpoint file {ckpt} is corrupt or not a Lightning checkpoint")


def test_a_checkpoint_cut_short_before_lightningclis_own_read_is_named(cli_in_process, tmp_path, masked_checkpoint,
                                                                      monkeypatch):
    # lit_ppo checks --ckpt_path when it parses; LightningCLI then reads the file for its hyperparameters. The file is
    # cut short in between here. Before: torch's "PytorchStreamReader failed reading zip archive" traceback.
    import lit_ppo.cli

    ckpt = tmp_path / "copy.ckpt"
    ckpt.write_bytes(masked_checkpoint[0].read_bytes())
    check = lit_ppo.cli.check_checkpoint_file

    def check_then_cut(path):
        checked = check(path)
        if checked is not None:
            ckpt.write_bytes(ckpt.read_bytes()[:4096])
        return checked

    monkeypatch.setattr(lit_ppo.cli, "check_checkpoint_file", check_then_cut)
    proc = cli_in_process("validate", "--data.env_id", MASKED, "--ckpt_path", ckpt, *QUIET, cwd=tmp_path)
    one_error(proc, f"checkpoint file {ckpt} is corrupt or not a Lightning checkpoint")


@pytest.mark.parametrize("text, fragments", [
    ("model:\n\tlr: 0.1\n", ["bad.yaml: not valid YAML at line 2, column 1", "replace the tab"]),
    ("model:\n  lr: [0.1\n", ["bad.yaml: not valid YAML at line 3", "expected ',' or ']'"]),
])
def test_a_config_that_is_not_yaml_is_named_with_its_line(cli_in_process, tmp_path, text, fragments):
    (tmp_path / "bad.yaml").write_text(text)
    proc = cli_in_process("fit", "--config", "cartpole.yaml", "--config", "bad.yaml", cwd=tmp_path)
    one_error(proc, *fragments)
    assert "<unicode string>" not in proc.stderr


def test_an_unknown_logger_class_names_the_fix(cli_in_process, tmp_path):
    proc = cli_in_process("fit", "--config", "cartpole.yaml", "--trainer.logger",
                          "lightning.pytorch.loggers.NoSuchLogger", cwd=tmp_path)
    one_error(proc, "trainer.logger: cannot import lightning.pytorch.loggers.NoSuchLogger", "CSVLogger",
              "false logs nothing")
    assert "Given value type" not in proc.stderr and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("where", ["command line", "config file"])
def test_an_unknown_logger_name_without_a_module_names_the_fix(cli_in_process, tmp_path, where):
    # Before: jsonargparse's dump of every type trainer.logger's union allows, without the fix.
    (tmp_path / "logger.yaml").write_text("trainer:\n  logger: NoSuchLogger\n")
    given = ["--trainer.logger", "NoSuchLogger"] if where == "command line" else ["--config", "logger.yaml"]
    proc = cli_in_process("fit", "--config", "cartpole.yaml", *given, cwd=tmp_path)
    one_error(proc, "trainer.logger: cannot import NoSuchLogger", "CSVLogger", "false logs nothing")
    assert "Given value type" not in proc.stderr and not (tmp_path / "runs").exists()


# -- tools: what cannot work is said before the work ---------------------------------------------------------------
@pytest.mark.parametrize("args, fragments", [
    (["--storage", "notaurl"], ["--storage: 'notaurl' cannot hold the study", "sqlite:///tune.db"]),
    (["--storage", "sqlite:////nonexistent_lit_ppo_dir/x/tune.db"], ["--storage:", "unable to open database file"]),
    (["--eval-every", "0"], ["--eval-every: must be at least 1"]),
    (["--trials", "0"], ["--trials: must be at least 1"]),
    (["--out", "notadir.txt/best.yaml"], ["--out: cannot write notadir.txt/best.yaml", "is a file, not a directory"]),
])
def test_tune_refuses_what_cannot_work_before_any_trial(cli_in_process, tmp_path, args, fragments):
    (tmp_path / "notadir.txt").write_text("a file\n")
    proc = cli_in_process("tune", "--config", "cartpole.yaml", "--trials", "1", *args, "--data.total_timesteps", "512",
                          cwd=tmp_path)
    one_error(proc, *fragments, tool="tune")
    assert "trial 0" not in proc.stdout  # nothing ran
    assert (tmp_path / "notadir.txt").read_text() == "a file\n"


def test_export_refuses_an_unwritable_output_before_exporting(cli_in_process, tmp_path, masked_checkpoint):
    ckpt, digest = masked_checkpoint
    (tmp_path / "notadir.txt").write_text("a file\n")
    proc = cli_in_process("export", "--ckpt_path", ckpt, "--format", "onnx", "--output", "notadir.txt/policy.onnx",
                          cwd=tmp_path)
    one_error(proc, "--output: cannot write notadir.txt/policy.onnx", tool="export")
    assert sha(ckpt) == digest and (tmp_path / "notadir.txt").read_text() == "a file\n"


def test_export_of_a_file_that_is_no_checkpoint_is_one_line(cli_in_process, tmp_path):
    (tmp_path / "notes.yaml").write_text("model:\n  lr: 0.1\n")
    proc = cli_in_process("export", "--ckpt_path", "notes.yaml", "--format", "onnx", cwd=tmp_path)
    one_error(proc, "checkpoint file notes.yaml is corrupt or not a Lightning checkpoint", tool="export")
    assert "weights_only" not in proc.stderr  # torch's multi-line advice


@pytest.mark.parametrize("args, fragments", [
    (["--config", "nosuch.yaml", "--iterations", "3"], ["--config nosuch.yaml: no such file", "cartpole.yaml"]),
    (["--config", "cartpole.yaml", "--iterations", "3", "--data.num_envs", "0"],
     ["the all-cpu run of cartpole.yaml --data.num_envs 0 failed", "data.num_envs: must be positive"]),
])
def test_profile_names_what_failed_in_one_line(cli_in_process, tmp_path, args, fragments):
    proc = cli_in_process("profile", *args, cwd=tmp_path)
    one_error(proc, *fragments, tool="profile")


def test_a_logger_whose_package_is_missing_names_the_extra(cli_in_process, tmp_path):
    pytest.importorskip("lightning")
    import importlib.util

    if importlib.util.find_spec("wandb") is not None:
        pytest.skip("wandb is installed here")
    proc = cli_in_process("fit", "--config", "cartpole.yaml", "--trainer.logger",
                          "lightning.pytorch.loggers.WandbLogger", cwd=tmp_path)
    one_error(proc, "trainer.logger: WandbLogger needs the wandb package", "pip install 'lit_ppo[wandb]'")

"""No tool writes over a checkpoint or its own input, by any name, and an output that cannot be written is said before
the work: by trying (as root, ``os.access`` says yes to ``/proc``)."""

import shutil

import pytest

from tests.test_error_paths import one_error, sha

pytestmark = pytest.mark.usefixtures("no_child_left")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from tests.conftest import run_cli

    run_dir = tmp_path_factory.mktemp("outputs")
    run_cli("fit", "--config", "cartpole.yaml", "--data.total_timesteps", "512", "--trainer.logger", "false",
            "--trainer.enable_progress_bar", "false", cwd=run_dir)
    return run_dir / "runs/cartpole/checkpoints/last.ckpt"


@pytest.mark.parametrize("fmt, output, fragment", [
    ("torchscript", "runs/x/last.ckpt", "is the input file"),  # the checkpoint itself
    ("onnx", "best.ckpt", "is a checkpoint"),  # another checkpoint
    ("torchscript", "policy.pt", "is a checkpoint"),  # a checkpoint by its content, whatever its name
], ids=["the-input", "another-checkpoint", "by-content"])
def test_export_never_writes_over_a_checkpoint(cli_in_process, tmp_path, checkpoint, fmt, output, fragment):
    ckpt = tmp_path / "runs/x/last.ckpt"
    ckpt.parent.mkdir(parents=True)
    shutil.copy(checkpoint, ckpt)
    for name in ("best.ckpt", "policy.pt"):
        shutil.copy(checkpoint, tmp_path / name)
    digests = {path: sha(path) for path in (ckpt, tmp_path / "best.ckpt", tmp_path / "policy.pt")}
    proc = cli_in_process("export", "--ckpt_path", ckpt, "--format", fmt, "--output", output, cwd=tmp_path)
    one_error(proc, f"--output: {output} {fragment}", "give another file name", tool="export")
    assert {path: sha(path) for path in digests} == digests


def test_export_of_a_checkpoint_named_like_its_default_output_writes_beside_it(cli_in_process, tmp_path, checkpoint):
    # before: the default output, the checkpoint's path with .pt, was model.pt itself, and the export replaced it
    ckpt = tmp_path / "model.pt"
    shutil.copy(checkpoint, ckpt)
    digest = sha(ckpt)
    proc = cli_in_process("export", "--ckpt_path", ckpt, "--format", "torchscript", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sha(ckpt) == digest and f"wrote {tmp_path / 'model-policy.pt'}" in proc.stdout
    import lit_ppo

    assert lit_ppo.load_policy(tmp_path / "model-policy.pt").recurrent is False


def test_export_replaces_an_earlier_export_and_leaves_no_temporary_file(cli_in_process, tmp_path, checkpoint):
    (tmp_path / "policy.pt").write_text("an earlier file that is no checkpoint\n")
    proc = cli_in_process("export", "--ckpt_path", checkpoint, "--format", "torchscript", "--output", "policy.pt",
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    from lit_ppo.checkpointing.files import file_kind

    assert file_kind(tmp_path / "policy.pt") == "torchscript"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy.pt"]


def test_export_to_a_directory_that_takes_no_file_is_refused_before_exporting(cli_in_process, tmp_path, checkpoint):
    # before (as root): os.access said yes, and the export's own write raised a traceback
    proc = cli_in_process("export", "--ckpt_path", checkpoint, "--format", "onnx", "--output", "/proc/x.onnx",
                          cwd=tmp_path)
    one_error(proc, "--output: cannot write /proc/x.onnx: the directory /proc is not writable", tool="export")


@pytest.mark.parametrize("out, fragment", [
    ("/proc/best.yaml", "--out: cannot write /proc/best.yaml: the directory /proc is not writable"),
    ("saved.ckpt", "--out: saved.ckpt is a checkpoint"),
    ("mine.yaml", "--out: mine.yaml is the input file"),
], ids=["unwritable", "a-checkpoint", "the-config"])
def test_tune_refuses_an_output_it_must_not_write_before_any_trial(cli_in_process, tmp_path, checkpoint, out,
                                                                   fragment):
    pytest.importorskip("optuna")
    shutil.copy(checkpoint, tmp_path / "saved.ckpt")
    (tmp_path / "mine.yaml").write_text("data:\n  total_timesteps: 512\n")
    digests = {name: sha(tmp_path / name) for name in ("saved.ckpt", "mine.yaml")}
    proc = cli_in_process("tune", "--config", "mine.yaml", "--trials", "1", "--out", out, "--data.total_timesteps",
                          "512", "--trainer.logger", "false", cwd=tmp_path)
    one_error(proc, fragment, tool="tune")
    assert "trial 0" not in proc.stdout  # nothing ran
    assert {name: sha(tmp_path / name) for name in digests} == digests


def test_plot_never_writes_over_a_checkpoint(cli_in_process, tmp_path, checkpoint):
    pytest.importorskip("matplotlib")
    shutil.copy(checkpoint, tmp_path / "last.ckpt")
    digest = sha(tmp_path / "last.ckpt")
    proc = cli_in_process("plot", str(tmp_path), "--out", "last.ckpt", cwd=tmp_path)
    one_error(proc, "--out: last.ckpt is a checkpoint", tool="plot")
    assert sha(tmp_path / "last.ckpt") == digest


def test_load_policy_tells_a_file_by_its_content_not_its_name(cli_in_process, tmp_path, checkpoint):
    # Before: a checkpoint saved as model.pt was "not a file lit_ppo export wrote", by its suffix alone.
    import numpy as np

    import lit_ppo

    shutil.copy(checkpoint, tmp_path / "model.pt")
    proc = cli_in_process("export", "--ckpt_path", checkpoint, "--format", "torchscript", "--output", "policy.pt",
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (tmp_path / "policy.pt").rename(tmp_path / "policy.bin")  # an exported file under a name that says nothing
    obs = np.zeros(4, np.float32)
    for name in ("model.pt", "policy.bin"):
        action, _ = lit_ppo.load_policy(tmp_path / name).predict(obs, deterministic=True)
        assert action == lit_ppo.load_policy(checkpoint).predict(obs, deterministic=True)[0], name
    if __import__("importlib").util.find_spec("onnxruntime") is not None:
        proc = cli_in_process("export", "--ckpt_path", checkpoint, "--format", "onnx", "--output", "policy.onnx",
                              cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-2000:]
        (tmp_path / "policy.onnx").rename(tmp_path / "policy.model")
        assert lit_ppo.load_policy(tmp_path / "policy.model").predict(obs, deterministic=True)[0] == action

"""The progress bar in environment steps and the evaluation-video callback, through the CLI."""

import re

import pytest

from tests.conftest import TB_AND_CSV_LOGGERS_YAML

VIDEO = ["--trainer.callbacks+=lit_ppo.callbacks.EvaluationVideo", "--trainer.callbacks.max_frames", "40",
         "--trainer.callbacks.every_n_iterations", "5"]


@pytest.fixture(scope="module")
def video_run(tmp_path_factory):
    """A 10-rollout fit with the default progress bar, two loggers and a video every 5 rollouts."""
    from tests.conftest import run_cli

    for name in ("imageio", "imageio_ffmpeg", "pygame", "moviepy"):
        pytest.importorskip(name)
    run_dir = tmp_path_factory.mktemp("video")
    (run_dir / "loggers.yaml").write_text(TB_AND_CSV_LOGGERS_YAML)
    proc = run_cli("fit", "--config", "cartpole.yaml", "--config", "loggers.yaml", "--data.total_timesteps", "2560",
                   *VIDEO, cwd=run_dir)
    return run_dir, proc


def test_progress_bar_counts_environment_steps(video_run):
    _, proc = video_run
    final = proc.stdout.replace("\r", "\n").splitlines()
    [last] = [line for line in final if line.startswith("env steps: 100%")][-1:]
    assert "2.56k/2.56k" in last  # steps done / budget
    assert re.search(r"rollout/return_mean=[\d.]+", last) and re.search(r"time/sps=\d+", last)


def test_videos_are_written_and_handed_to_loggers_that_take_them(video_run):
    import imageio.v3 as iio
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir, proc = video_run
    [version] = list((run_dir / "logs/tb").glob("version_*"))  # the first logger's directory
    videos = sorted(p.name for p in (version / "videos").glob("*.mp4"))
    assert videos == ["iter00005.mp4", "iter00010.mp4"]
    frames = iio.imread(version / "videos/iter00010.mp4", plugin="FFMPEG")
    assert frames.shape == (40, 400, 600, 3)  # CartPole's render, max_frames of it
    assert frames.std() > 0  # not a blank picture
    # TensorBoard got it through add_video (an animated GIF image summary), at the env steps of its iteration.
    events = EventAccumulator(str(version))
    events.Reload()
    images = events.Images("eval/video")
    assert [i.step for i in images] == [1280, 2560]
    assert all(i.encoded_image_string.startswith(b"GIF8") and i.width == 300 for i in images)  # a preview
    # The CSV logger takes no media (MLflow's artifacts: tests/test_loggers.py).
    assert "iter00010.mp4 -> add_video\n" in proc.stdout


def test_video_at_validate_with_a_logger_that_takes_no_media(cli, video_run):
    run_dir, _ = video_run
    proc = cli("validate", "--config", "cartpole.yaml", "--ckpt_path", "runs/cartpole/checkpoints/last.ckpt",
               "--trainer.logger", "lightning.pytorch.loggers.CSVLogger", "--trainer.logger.save_dir", "val",
               "--trainer.enable_progress_bar", "false", *VIDEO[:3], cwd=run_dir)
    [video] = list((run_dir / "val").glob("*/version_*/videos/validate.mp4"))
    assert f"): {video.relative_to(run_dir)}\n" in proc.stdout  # the path, handed to no logger

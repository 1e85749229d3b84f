"""``python -m lit_ppo plot``: reading what Lightning's CSV and TensorBoard loggers wrote, and the figure."""

import numpy as np
import pytest
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

from lit_ppo.tools.plot import curve, find_runs, main, mean_and_std, read_run

pytest.importorskip("matplotlib")


def write_run(logger, offset: float) -> None:
    """Metrics laid out as PPOModule logs them: per rollout and evaluation at the env steps so far (256 a
    rollout); an evaluation follows every second rollout, in a log call of its own."""
    for i in range(1, 6):
        logger.log_metrics({"rollout/return_mean": 10.0 * i + offset, "time/env_steps": 256.0 * i}, step=256 * i)
        if i % 2 == 0:
            logger.log_metrics({"eval/return_mean": 100.0 * i + offset}, step=256 * i)
    logger.save()
    logger.finalize("success")


@pytest.fixture
def runs(tmp_path):
    """Two seeds with the CSV logger, one with TensorBoard, written by the loggers themselves."""
    for offset in (0.0, 2.0):
        write_run(CSVLogger(tmp_path / "csv", name="cartpole"), offset)
    write_run(TensorBoardLogger(tmp_path / "tb", name="cartpole"), 1.0)
    return tmp_path


def test_csv_and_tensorboard_read_the_same(runs):
    [tb_run] = find_runs(runs / "tb")
    csv_runs = find_runs(runs / "csv")
    assert [r.name for r in csv_runs] == ["version_0", "version_1"]
    x, y = curve(read_run(csv_runs[0]), "rollout/return_mean")
    np.testing.assert_allclose(x, [256, 512, 768, 1024, 1280])
    np.testing.assert_allclose(y, [10, 20, 30, 40, 50])
    tb_x, tb_y = curve(read_run(tb_run), "rollout/return_mean")
    np.testing.assert_allclose(tb_x, x)
    np.testing.assert_allclose(tb_y, y + 1.0)
    x, y = curve(read_run(csv_runs[1]), "eval/return_mean")
    np.testing.assert_allclose(x, [512, 1024])
    np.testing.assert_allclose(y, [202, 402])


def test_mean_and_std_across_runs():
    grid, mean, std = mean_and_std([(np.array([0.0, 10.0]), np.array([0.0, 10.0])),
                                    (np.array([0.0, 5.0, 20.0]), np.array([2.0, 7.0, 22.0]))])
    np.testing.assert_allclose(grid, [0, 5, 10])  # up to the end of the shortest run
    np.testing.assert_allclose(mean, [1, 6, 11])
    np.testing.assert_allclose(std, [1, 1, 1])


def test_plot_command_writes_a_png(runs, capsys):
    import matplotlib.image

    assert main([str(runs / "csv"), str(runs / "tb"), "--out", str(runs / "curve.png")]) == 0
    assert "rollout/return_mean, eval/return_mean over 3 runs" in capsys.readouterr().out
    image = matplotlib.image.imread(runs / "curve.png")
    assert image.ndim == 3 and image.shape[0] > 400 and image.std() > 0


def test_plot_on_a_directory_without_metrics_says_so(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main([str(tmp_path / "empty")]) == 2
    assert "no metrics.csv or TensorBoard event file" in capsys.readouterr().err
    assert main([str(tmp_path / "missing")]) == 2
    assert "not a directory" in capsys.readouterr().err

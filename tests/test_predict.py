"""``python -m lit_ppo predict --ckpt_path X``: Lightning's predict loop plays episodes and writes them as CSV."""

import csv


def test_predict_writes_one_row_per_episode(cli_in_process, tmp_path):
    proc = cli_in_process("fit", "--config", "cartpole.yaml", "--data.total_timesteps", "2560",
                          "--trainer.enable_progress_bar", "false", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    ckpt = tmp_path / "runs/cartpole/checkpoints/last.ckpt"
    proc = cli_in_process("predict", "--ckpt_path", ckpt, "--data.eval_episodes", "7", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    [written] = list(tmp_path.glob("lightning_logs/version_*/episodes.csv"))  # the log dir, without a config
    assert "predict: 7 episodes" in proc.stdout and str(written.relative_to(tmp_path)) in proc.stdout
    rows = list(csv.DictReader(written.open()))
    assert [int(r["episode"]) for r in rows] == list(range(7))
    for row in rows:
        # CartPole pays 1 per step, so a return equals its length; the policy is deterministic, the starts are not.
        assert float(row["return"]) == int(row["length"]) and 8 <= int(row["length"]) <= 500
    assert len({r["length"] for r in rows}) > 1

"""``python -m lit_ppo tune``: a real Optuna study (SQLite storage) of tiny CartPole fits, resumed, and the best
trial's config fitted as written; pruning through the Lightning callback."""

import pytest
import yaml

optuna = pytest.importorskip("optuna")

from lit_ppo.tools import tune  # noqa: E402

TINY = ["--data.total_timesteps", "1024", "--data.eval_episodes", "4", "--trainer.enable_progress_bar", "false"]


def test_a_study_runs_resumes_and_writes_a_config_that_fits(cli_in_process, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    common = ["--config", "cartpole.yaml", "--eval-every", "2", "--storage", f"sqlite:///{tmp_path}/study.db"]
    assert tune.main([*common, "--trials", "2", *TINY]) == 0
    out = capsys.readouterr().out
    assert "0 of 2 trials finished" in out and "trial 1:" in out and "wrote cartpole_best.yaml" in out
    # an interrupted or extended study goes on from the storage
    assert tune.main([*common, "--trials", "3", *TINY]) == 0
    out = capsys.readouterr().out
    assert "2 of 3 trials finished" in out and "trial 2:" in out and "trial 3:" not in out
    study = optuna.load_study(study_name="cartpole", storage=f"sqlite:///{tmp_path}/study.db")
    assert len(study.trials) == 3
    written = yaml.safe_load((tmp_path / "cartpole_best.yaml").read_text())
    best = study.best_trial.user_attrs["settings"]
    assert written["model"]["lr"] == best["model"]["lr"] and written["data"]["num_steps"] == best["data"]["num_steps"]
    proc = cli_in_process("fit", "--config", "cartpole_best.yaml", "--data.total_timesteps", "1024",
                          "--trainer.enable_progress_bar", "false", "--trainer.logger", "false", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "runs/cartpole/checkpoints/last.ckpt").exists()


def test_a_trial_the_pruner_rejects_stops_at_that_evaluation(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    study = optuna.create_study(direction="maximize", pruner=optuna.pruners.ThresholdPruner(lower=1e9))
    # at least 2 iterations whatever num_steps the trial draws (8 envs x at most 512 steps), evaluated after each
    overrides = ["--data.total_timesteps", str(2 * 8 * 512), "--data.eval_episodes", "2",
                 "--trainer.enable_progress_bar", "false"]
    study.optimize(lambda t: tune.run_trial(t, "cartpole.yaml", overrides, 8, 1, tmp_path / "t"), n_trials=1)
    [trial] = study.trials
    assert trial.state == optuna.trial.TrialState.PRUNED
    assert list(trial.intermediate_values) == [8 * trial.params["num_steps"]]  # the first evaluation, then stopped


def test_a_bad_override_is_named_before_any_trial(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert tune.main(["--config", "cartpole.yaml", "--trials", "1", "--data.num_envs", "0"]) == 2
    assert "data.num_envs" in capsys.readouterr().err and not (tmp_path / "tune.db").exists()


def test_a_recurrent_config_draws_only_minibatches_of_whole_sequences():
    # A recurrent policy's minibatch is whole environment sequences: with 4 envs, 1, 2 or 4 minibatches per epoch
    # (minibatch_size a multiple of num_steps), never 8, which would fail the trial's fit.
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    counts = set()
    for _ in range(40):
        trial = study.ask()
        data = tune.sample_settings(trial, num_envs=4, recurrent=True)["data"]
        assert data["minibatch_size"] % data["num_steps"] == 0, data
        counts.add(4 * data["num_steps"] // data["minibatch_size"])
        study.tell(trial, 0.0)
    assert counts == {1, 2, 4}
    # without a recurrent core every count is drawn: each divides num_envs * num_steps (num_steps >= 16)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    trials = [study.ask() for _ in range(40)]
    for t in trials:
        data = tune.sample_settings(t, num_envs=3)["data"]
        assert (3 * data["num_steps"]) % data["minibatch_size"] == 0
    assert {t.params["minibatches"] for t in trials} == {1, 2, 4, 8}

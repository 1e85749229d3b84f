"""The benchmark scripts run end to end with a tiny budget, so that they cannot rot. Nothing here asserts a
timing: the figures are for people (see the README's Performance section), not for CI. The studies in
benchmarks/archive/ are not run here: they are kept as they were last run, not maintained."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
HAVE_SB3 = importlib.util.find_spec("stable_baselines3") is not None


def run(script: str, *args: str, env: Optional[dict] = None) -> str:
    proc = subprocess.run([sys.executable, str(BENCHMARKS / script), *args], capture_output=True, text=True,
                          timeout=600, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, f"{script} exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    return proc.stdout


@pytest.mark.parametrize("arms", [["lit_ppo", "lit_overlap", "cleanrl"], pytest.param(["sb3"], marks=pytest.mark.skipif(
    not HAVE_SB3, reason="stable_baselines3 not installed (the bench extra)"))])
def test_compare_quick(arms, tmp_path):
    # SB3 creates an empty log directory in the temp dir at every learn() unless given a logger: none is left
    # One setting: the other is the same code with other numbers (its table is printed by the same function).
    out = run("compare.py", "--quick", "--settings", "zoo", "--arms", *arms, env={"TMPDIR": str(tmp_path)})
    assert not list(tmp_path.glob("SB3-*"))
    assert "zoo:" in out
    assert "learn ms" in out and "iter ms" in out  # every arm's update phase timed
    if "lit_ppo" in arms:
        assert "lit_ppo/CleanRL: SPS" in out and "CleanRL's time over lit_ppo's: updates" in out
        assert "lit_overlap/CleanRL: SPS" in out and "lit_overlap/lit_ppo: SPS" in out


def test_time_to_solve_quick():
    out = run("time_to_solve.py", "--quick")
    assert "(a) fit s" in out and "import lit_ppo.cli" in out
    assert ("lit_ppo/SB3:" in out) == HAVE_SB3


def test_scaling_quick():
    out = run("scaling.py", "--quick", "--bound", "--num-envs", "4", "--vectorization", "sync", "native")
    assert "lit/plain" in out and "RSS growth" in out and "lit_ppo native/sync SPS: 4 envs" in out


def test_learning_resumes_an_interrupted_run_evaluates_reports_and_skips_it_once_finished(tmp_path):
    """One run through every stage of the runner: stopped by SIGTERM after its first checkpoint, continued by the
    same command, evaluated, reported, and skipped by a third invocation."""
    import signal
    import time

    pytest.importorskip("matplotlib")
    args = [sys.executable, str(BENCHMARKS / "learning.py"), "--configs", "cartpole.yaml", "--seeds", "2",
            "--timesteps", str(40 * 256), "--eval-episodes", "3",
            "--fit-args", "--trainer.check_val_every_n_epoch 20 --trainer.callbacks.init_args.every_n_epochs 2 "
            "--data.eval_episodes 3",
            "--out", str(tmp_path / "out"), "--report", str(tmp_path / "docs/results.md")]
    run_dir = tmp_path / "out/cartpole/steps10240/seed2"
    first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while not (run_dir / "runs/cartpole/checkpoints/last.ckpt").exists():
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()[0]
        time.sleep(0.05)
    first.send_signal(signal.SIGTERM)  # passed on to the fit: it saves last.ckpt at its next rollout boundary
    out = first.communicate(timeout=120)[0]
    assert first.returncode == 130 and "stopped; run the same command again" in out, out
    assert "fit cartpole.yaml seed 2" in out and not (run_dir / "result.json").exists()
    again = run("learning.py", *args[2:])
    assert "(resuming)" in again
    result = json.loads((run_dir / "result.json").read_text())
    assert (result["config"], result["seed"], result["total_timesteps"], result["budget_overridden"]) == (
        "cartpole.yaml", 2, 40 * 256, True)
    assert result["fit_attempts"] == 2 and result["final"]["env_steps"] == 40 * 256
    assert result["final"]["episodes"] == 3
    assert result["best"]["env_steps"] in (20 * 256, 40 * 256)  # evaluations after iterations 20 and 40
    assert result["fit_wall_s"] > 0 and result["cpu"]
    report = (tmp_path / "docs/results.md").read_text()
    assert "## CartPole-v1 (`configs/cartpole.yaml`)" in report and "10,240 (published 100,000)" in report
    assert "500.0 ± 0.0 at 100k (RL-Zoo benchmark.md" in report and (tmp_path / "docs/results/cartpole.png").exists()
    # a third invocation finds the result and runs nothing
    third = run("learning.py", *args[2:])
    assert "skip cartpole.yaml seed 2" in third and "fit cartpole" not in third
    assert json.loads((run_dir / "result.json").read_text()) == result


class RunnerDied(BaseException):
    """The runner's own end mid-fit (as a KeyboardInterrupt would be, but not one: pytest-xdist takes a
    KeyboardInterrupt raised in a test as its worker's interruption, and once ended a CI run's worker with it)."""


def test_learning_keeps_an_attempt_whose_driver_was_killed_outright(tmp_path, monkeypatch):
    """A runner killed with SIGKILL cannot write its attempt when the fit ends: the record written before the fit
    started stays; the next run refuses to start beside that fit while it still runs, then counts the attempt,
    timed to its last checkpoint (the work after that was lost)."""
    import time

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import learning

    run_dir = tmp_path / "cartpole/steps512/seed1"
    on_disk, test_began = {}, time.time()

    def fit_then_runner_killed(commands, cwd, log, on_signal, started):  # saves once, 30 s into the fit
        started(4242)  # the fit's pid, written before it runs
        (cwd / "runs/cartpole/checkpoints").mkdir(parents=True, exist_ok=True)
        saved = cwd / "runs/cartpole/checkpoints/last.ckpt"
        saved.write_text("")
        on_disk["fit.json"] = (cwd / "fit.json").read_text()  # what a SIGKILL now would leave
        begun = json.loads(on_disk["fit.json"])["attempts"][-1]["started"]
        os.utime(saved, (begun + 30.0, begun + 30.0))
        raise RunnerDied

    monkeypatch.setattr(learning, "evaluate", lambda *args: {"final": {"return_mean": 1.0, "return_std": 0.0},
                                                              "wall_s": 0.0})
    monkeypatch.setattr(learning, "write_curves", lambda directory: None)
    config = learning.CONFIG_DIR / "cartpole.yaml"
    monkeypatch.setattr(learning, "lit_ppo", fit_then_runner_killed)
    with pytest.raises(RunnerDied):
        learning.run_one(config, 1, 512, 3, [], tmp_path, {})
    assert json.loads((run_dir / "fit.json").read_text())["attempts"][-1]["exit"] == "error"  # the runner's own
    (run_dir / "fit.json").write_text(on_disk["fit.json"])
    assert [(a["exit"], a["pid"]) for a in json.loads(on_disk["fit.json"])["attempts"]] == [("running", 4242)]

    fit = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "-m", "lit_ppo"])  # its fit, alive
    try:
        progress = json.loads(on_disk["fit.json"])
        progress["attempts"][-1]["pid"] = fit.pid
        (run_dir / "fit.json").write_text(json.dumps(progress))
        with pytest.raises(RuntimeError, match=f"still runs in .*pid {fit.pid}.*kill {fit.pid}"):
            learning.run_one(config, 1, 512, 3, [], tmp_path, {})
    finally:
        fit.kill()
        fit.wait()
    monkeypatch.setattr(learning, "lit_ppo", lambda commands, cwd, log, on_signal, started: (0, 12.0))
    result = learning.run_one(config, 1, 512, 3, [], tmp_path, {})
    assert result["fit_attempts"] == 2 and result["fit_attempts_killed"] == 1
    assert result["fit_wall_s"] == 42.0  # 30 s to the killed attempt's last checkpoint + the 12 s resumed fit
    attempts = json.loads((run_dir / "fit.json").read_text())["attempts"]
    assert [(a["exit"], a["resumed"]) for a in attempts] == [("killed", False), (0, True)]
    assert test_began <= attempts[0]["started"] <= attempts[1]["started"] <= time.time()  # when each began


def test_learning_sets_aside_a_run_of_other_settings_and_runs_again(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import learning

    def fake_fit(commands, cwd, log, on_signal, started=None):  # what a finished fit leaves, without training
        (cwd / "runs/cartpole/checkpoints").mkdir(parents=True, exist_ok=True)
        (cwd / "runs/cartpole/checkpoints/last.ckpt").write_text("")
        return 0, 1.0

    monkeypatch.setattr(learning, "lit_ppo", fake_fit)
    monkeypatch.setattr(learning, "evaluate", lambda *args: {"final": {"return_mean": 1.0, "return_std": 0.0},
                                                              "wall_s": 0.0})
    monkeypatch.setattr(learning, "write_curves", lambda directory: None)
    config = learning.CONFIG_DIR / "cartpole.yaml"
    run_dir = tmp_path / "cartpole/steps512/seed1"
    assert learning.run_one(config, 1, 512, 3, [], tmp_path, {})["config_sha"] == learning.config_sha(config)
    assert learning.run_one(config, 1, 512, 3, [], tmp_path, {}) is None  # the same settings: skipped
    result = json.loads((run_dir / "result.json").read_text())
    (run_dir / "result.json").write_text(json.dumps({**result, "config_sha": "0123456789ab"}))
    assert learning.run_one(config, 1, 512, 3, [], tmp_path, {}) is not None  # other settings: run again
    assert json.loads((tmp_path / "cartpole/steps512/stale-0123456789ab-seed1/result.json").read_text())[
        "config_sha"] == "0123456789ab"


def test_a_run_from_before_a_default_was_spelled_out_is_of_the_configs_settings(tmp_path, monkeypatch):
    """d2d0696 wrote ``target_kl: null`` into every config when the default became 0.02: a run from before, which left
    it out (then the default), has the same settings; a run since, or of another value, has not."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import yaml
    from learning_report import same_settings, settings_sha

    settings = {"model": {"lr": 0.001, "target_kl": None}, "data": {"env_id": "CartPole-v1"}}
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump(settings))
    without = settings_sha({"model": {"lr": 0.001}, "data": {"env_id": "CartPole-v1"}})
    unknown_commit = ["0000000"]  # not in this history: the run's date decides
    assert same_settings({"config_sha": settings_sha(settings), "date": "2026-12-07"}, config)
    assert same_settings({"config_sha": without, "commits": unknown_commit, "date": "2026-12-04"}, config)
    assert not same_settings({"config_sha": without, "commits": unknown_commit, "date": "2026-12-07"}, config)
    assert not same_settings({"config_sha": settings_sha({"model": {"lr": 0.002}}), "date": "2026-12-04"}, config)
    config.write_text(yaml.safe_dump({**settings, "model": {"lr": 0.001, "target_kl": 0.05}}))  # not the old default
    assert not same_settings({"config_sha": without, "commits": unknown_commit, "date": "2026-12-04"}, config)


def test_the_report_keeps_every_committed_run_of_the_shipped_configs(monkeypatch):
    """Each run under benchmarks/results/learning is of its config's current settings (a run of others is moved to
    ``stale-*`` or benchmarks/results/recipe/), so regenerating docs/results.md drops none of its rows."""
    if subprocess.run(["git", "-C", str(BENCHMARKS), "cat-file", "-e", "d2d0696^{commit}"]).returncode:
        pytest.skip("needs the repository's history (this is a shallow clone): runs are dated by their commits")
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import learning_report

    out = BENCHMARKS / "results" / "learning"
    kept = {r["_dir"] for r in learning_report.load_results(out)}
    assert sorted(str(p.parent.relative_to(out)) for p in out.glob("*/steps*/seed*/result.json")
                  if p.parent not in kept) == []


def test_learning_report_judges_only_runs_at_the_published_budget_and_counts_the_targets(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import learning_report

    assert [learning_report.steps(b) for b in ("100k", "1M", "5M", "2,048")] == [100_000, 1_000_000, 5_000_000, 2048]
    assert learning_report.mean_std([1.043, 1.043, 1.047]) == "1.044 ± 0.002"  # not 1.0 ± 0.0
    assert learning_report.mean_std([-16.81, -19.5]) == "-18.2 ± 1.3"
    acrobot = learning_report.published("acrobot.yaml")  # -73.506 +- 18.201 at 1M steps
    assert learning_report.verdict(-73.5, acrobot, 1_000_000) == "≥ published mean"
    assert learning_report.verdict(-91.0, acrobot, 1_000_000) == "≥ mean − 1 std"
    assert learning_report.verdict(-92.0, acrobot, 1_000_000) == "**below mean − 1 std**"
    assert learning_report.verdict(-50.0, acrobot, 500_000) == "n/a: smaller budget"
    assert learning_report.verdict(-50.0, acrobot, 2_000_000) == "n/a: larger budget"

    def run(config, env_id, budget, finals):
        return [{"config": config, "env_id": env_id, "total_timesteps": budget, "budget_overridden": False,
                 "final": {"return_mean": f}} for f in finals]

    by_config = {"acrobot.yaml": {1_000_000: run("acrobot.yaml", "Acrobot-v1", 1_000_000, [-70.0, -80.0, -90.0])},
                 "cartpole.yaml": {100_000: run("cartpole.yaml", "CartPole-v1", 100_000, [500.0] * 3),
                                   50_000: run("cartpole.yaml", "CartPole-v1", 50_000, [100.0])}}
    text = "\n".join(learning_report.summary(by_config))
    assert "| `acrobot.yaml` | Acrobot-v1 | 1,000,000 | 3 | -80.0 ± 8.2 | -73.5 at 1M | ≥ mean − 1 std |" in text
    assert "| `cartpole.yaml` | CartPole-v1 | 50,000 | 1 | 100.0 (1 seed) | 500.0 at 100k | n/a: smaller budget |" in text
    assert "| `walker2d.yaml` | Walker2d-v5 | 1,000,000 | 0 | not run here" in text  # listed without runs too
    assert "Of the 2 rows with a published score at the same budget, **1** are at or above the published mean " \
           "and **2** at or above the mean minus one std." in text


def test_defaults_study_runs_records_and_skips_finished_runs(tmp_path):
    out_file = tmp_path / "results.jsonl"
    # One arm: every lit_ppo arm is the same fit with other arguments.
    args = ["--envs", "CartPole-v1:2048", "--arms", "lit_cleanrl", "--seeds", "1", "--out", str(out_file)]
    out = run("defaults.py", *args)
    rows = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert [(r["arm"], r["env"], r["steps"], r["seed"]) for r in rows] == [("lit_cleanrl", "CartPole-v1", 2048, 1)]
    assert all(8 <= r["eval"] <= 500 for r in rows) and "`lit_cleanrl`" in out.splitlines()[-3]
    assert out.splitlines()[-1].startswith("| CartPole-v1, 2,048 | ")  # the run's row of the table
    run("defaults.py", *args)  # finished runs are skipped, not appended again
    assert len(out_file.read_text().splitlines()) == 1
    # a run stopped after its fit (its last.ckpt there, no row) continues from the checkpoint: the same policy
    out_file.write_text("")
    run("defaults.py", *args)
    assert [json.loads(line)["eval"] for line in out_file.read_text().splitlines()] == [rows[0]["eval"]]


def test_the_defaults_table_gives_each_arms_mean_and_seeds_and_a_dash_where_none_ran(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from defaults import markdown

    rows = [dict(arm="sb3", env="Ant-v5", steps=1000, seed=seed, eval=value) for seed, value in [(2, 30.0), (1, 10.0)]]
    rows += [dict(arm="lit_defaults", env="Ant-v5", steps=1000, seed=1, eval=v) for v in (1.0, 4.0)]  # rerun: last
    rows += [dict(arm="sb3", env="Ant-v5", steps=2000, seed=3, eval=99.0)]  # another budget: not this row's
    assert markdown(rows, ["Ant-v5:1000", "Hopper-v5:1000"], ["lit_defaults", "sb3"], [1, 2]) == [
        "| env, budget | `lit_defaults` | `sb3` |", "|---|---|---|",
        "| Ant-v5, 1,000 | 4.0 (4.0 / —) | 20.0 (10.0 / 30.0) |", "| Hopper-v5, 1,000 | — | — |"]


def test_every_defaults_arm_but_the_package_as_it_is_pins_the_defaults_it_ran_with(monkeypatch):
    # A changed default must not change what an older arm's rows measured: each arm pins the defaults it leaves unset
    # to their values before the change (a later flag overrides an earlier one), and sets its own as given.
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from defaults import ARMS

    def settings(args):
        return dict(zip(args[::2], args[1::2]))

    assert ARMS["lit_defaults"] == [] and ARMS["sb3"] is None
    assert settings(ARMS["lit_defaults_stagger"]) == {"--data.stagger_episodes": "true", "--model.log_std_init": "0.0",
                                                      "--model.ent_coef": "0.0"}
    assert settings(ARMS["lit_stagger_std05_ent01"]) == {"--data.stagger_episodes": "true",
                                                         "--model.log_std_init": "-0.5", "--model.ent_coef": "0.01"}
    assert settings(ARMS["lit_defaults_1203"])["--model.ent_coef"] == "null"  # its own bonus, kept
    assert all(settings(args).keys() >= {"--data.stagger_episodes", "--model.log_std_init", "--model.ent_coef"}
               for arm, args in ARMS.items() if arm not in ("lit_defaults", "sb3"))


def test_the_report_gives_tianshous_measure_the_maximum_over_training_of_the_seeds_mean(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import learning_report

    runs = []
    for seed, evals in ((1, {100: 1.0, 200: 5.0, 300: 2.0}), (2, {100: 3.0, 200: 1.0, 300: 6.0, 400: 9.0})):
        (tmp_path / f"s{seed}/curves").mkdir(parents=True)
        rows = "".join(f"{step},0.0,{value}\n{step + 50},1.0,\n" for step, value in evals.items())
        (tmp_path / f"s{seed}/curves/metrics.csv").write_text("step,rollout/return_mean,eval/return_mean\n" + rows)
        runs.append({"_dir": tmp_path / f"s{seed}"})
    # steps both seeds evaluated at: 100 (2.0), 200 (3.0), 300 (4.0); 400 only one seed did
    assert learning_report.max_of_seed_mean(runs) == (4.0, 300)
    assert learning_report.max_of_seed_mean([{"_dir": tmp_path / "none"}]) is None


def test_the_benchmarl_anchor_reads_its_task_and_budget_from_the_shipped_config(monkeypatch):
    # BenchMARL itself runs in an interpreter of its own (not installed here): what it is given is checked
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import benchmarl_anchor

    spec = benchmarl_anchor.spec_of("vmas_navigation.yaml")
    assert spec["scenario"] == "navigation" and spec["task"]["max_steps"] == 100 and spec["task"]["n_agents"] == 3
    assert spec["frames"] == 3_600_000 // 3  # agent steps -> BenchMARL's frames of all agents at once
    with pytest.raises(SystemExit, match="does not train a VMAS scenario"):
        benchmarl_anchor.spec_of("simple_spread.yaml")


def test_mujoco_speed_clocks_each_checkpoint_scores_it_and_skips_a_finished_run(tmp_path):
    # A lit_ppo arm end to end on CartPole (the SB3 arm needs rl_zoo3, which is no extra of lit_ppo).
    args = ["--configs", "cartpole.yaml", "--arms", "sync", "--seeds", "1", "--steps", "2304", "--every", "1024",
            "--out", str(tmp_path)]
    out = run("mujoco_speed.py", *args)
    [row] = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    # cartpole.yaml's rollout is 8 x 32 = 256 steps: a checkpoint every 4 rollouts, and the budget's (9 rollouts)
    assert [p["env_steps"] for p in row["curve"]] == [1024, 2048, 2304]
    seconds = [p["seconds"] for p in row["curve"]]
    assert 0 < seconds[0] < seconds[1] <= row["wall_s"] and all(8 <= p["return_mean"] <= 500 for p in row["curve"])
    assert "| `cartpole.yaml` | sync | 1 |" in out and "n/a (no SB3 run)" in out
    run("mujoco_speed.py", *args)  # finished: skipped, not run or appended again
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 1


def test_mujoco_speed_times_each_arm_to_sb3s_final_score(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import math

    from mujoco_speed import summarize

    def run_row(arm, seed, points):
        return {"config": "halfcheetah.yaml", "arm": arm, "seed": seed, "wall_s": 100.0 * seed,
                "curve": [{"env_steps": 1000 * (i + 1), "seconds": 10.0 * (i + 1), "return_mean": r}
                          for i, r in enumerate(points)]}

    rows = [run_row("sb3_zoo", 1, [1, 2, 3, 4]), run_row("sb3_zoo", 2, [1, 5, 5, 6]),
            run_row("sb3_zoo", 3, [0, 0, 0, 5]), run_row("sync", 1, [5, 6]), run_row("sync", 2, [0, 0]),
            run_row("sync", 3, [1, 5])]
    sb3, sync = summarize(rows)
    # SB3's final score: the median of its seeds' last scores (4, 6, 5) = 5, reached never, at 20 s and at 40 s
    assert sb3["target"] == 5 and sb3["to_target_s"] == 40 and sb3["reached"] == 2 and sb3["vs_sb3"] == 1
    # lit_ppo's seeds reach 5 at 10 s, never, 20 s: the median is 20 s, half SB3's
    assert sync["to_target_s"] == 20 and sync["reached"] == 2 and sync["vs_sb3"] == 0.5
    assert sync["final"] == 5 and sync["wall_s"] == 200
    sync_never = summarize(rows[:3] + [run_row("sync", 1, [0])])[1]
    assert sync_never["to_target_s"] == math.inf and sync_never["vs_sb3"] == math.inf


def test_mujoco_speed_trains_sb3_on_the_configs_env_kwargs(monkeypatch, tmp_path):
    # ant.yaml leaves Ant-v5's contact forces out of the observation: the SB3 arm must train on that env too
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from mujoco_speed import zoo_train_command

    cmd = zoo_train_command("zoo/bin/python", "Ant-v5", {"include_cfrc_ext_in_observation": False}, 1, 1000, tmp_path)
    at = cmd.index("--env-kwargs")
    assert cmd[at + 1:] == ["include_cfrc_ext_in_observation:False"] and cmd[cmd.index("--env") + 1] == "Ant-v5"
    assert "--env-kwargs" not in zoo_train_command("zoo/bin/python", "HalfCheetah-v5", {}, 1, 1000, tmp_path)

"""Learning quality against the published tables: shipped configs x seeds, each trained and evaluated as a user
would, then ``docs/results.md`` (a table per env beside the published score) and a PNG of the curves per env.

    nice -n 19 python benchmarks/learning.py [--configs lunarlander.yaml acrobot.yaml] [--seeds 1 2 3]
                                             [--timesteps 2000000] [--report-only]

Per config and seed, one process at a time, in its own directory ``OUT/<config>/steps<budget>/seed<S>/`` (the
fit's working directory, so the config's relative ``runs/<name>/...`` logs and checkpoints land there and no two
runs share one):

1. ``python -m lit_ppo fit --config C --seed_everything S [--data.total_timesteps T]``; a run interrupted before
   (``last.ckpt`` there, no ``fit.json``) continues with ``--ckpt_path last``;
2. ``python -m lit_ppo validate --ckpt_path <last.ckpt, then best.ckpt> [FIT_ARGS] --data.eval_episodes 20`` (both
   in one process): the final policy and the best in-fit evaluation's, on 20 deterministic episodes (seeded apart from
   training's);
3. ``result.json`` (config, seed, budget, both evaluations, wall time, CPU model) and ``curves/metrics.csv`` (the
   training and evaluation returns against env steps, every logger version of a resumed run merged).

A run whose ``result.json`` exists is skipped, unless the config's settings changed since (a hash of them is in
the result): that run's directory is then renamed ``stale-<hash>-seed<S>`` and the run starts over.
``--timesteps`` replaces the config's budget (where the published one cannot fit; the result and the table say
so). The report is rebuilt from every ``result.json`` under OUT after each run (``learning_report.py``).
SIGTERM/SIGINT stop the current fit at its next rollout boundary (it saves ``last.ckpt``; run the same command
again to continue). Each fit attempt is recorded in ``fit.json`` before it starts (``attempts.py``): if this runner
is itself killed outright (SIGKILL), the next run counts that attempt, timed to its last checkpoint, or refuses to
start while the fit it left behind still runs.
"""

import argparse
import csv
import json
import os
import platform
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Optional

from harness import REPO, child_env
from attempts import close_killed_attempt, write_json
from learning_report import config_sha, read_config, same_settings, write_report  # one way: the report never imports this file

CONFIG_DIR = REPO / "lit_ppo" / "configs"
DEFAULT_OUT = REPO / "benchmarks" / "results" / "learning"
CURVE_METRICS = ("rollout/return_mean", "eval/return_mean")
MAX_CURVE_POINTS = 500  # rollout-metric points kept per run in curves/metrics.csv (evaluations are all kept)
QUIET = ["--trainer.enable_progress_bar", "false"]


class Stopped(Exception):
    """SIGTERM/SIGINT reached the runner: the current fit was asked to stop and save."""


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        return next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name"))
    except (OSError, subprocess.CalledProcessError, StopIteration):
        return platform.processor() or "unknown"


def commit() -> str:
    """The repository's commit, ``+dirty`` where lit_ppo/ has uncommitted changes (the code that trained)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True).stdout.strip()

    return git("rev-parse", "--short", "HEAD") + ("+dirty" if git("status", "--porcelain", "--", "lit_ppo") else "")


def set_aside(directory: Path, sha: str) -> None:
    """Move a run of an earlier version of the config out of the way (kept, never deleted; not reported)."""
    stale = directory.with_name(f"stale-{sha}-{directory.name}")
    n = 1
    while stale.exists():
        stale, n = directory.with_name(f"stale-{sha}-{directory.name}-{n}"), n + 1
    directory.rename(stale)
    print(f"  {directory} holds a run of other settings of this config (sha {sha}); moved to {stale.name}", flush=True)


def run_dir(out: Path, config: Path, budget: int, seed: int) -> Path:
    return out / config.stem / f"steps{budget}" / f"seed{seed}"


# Several `python -m lit_ppo` command lines in one process (each a JSON list): evaluating the final and the best
# checkpoint costs one start-up (seconds on a busy machine), not two.
COMMANDS = "import json, sys; from lit_ppo.cli import main; [main(json.loads(args)) for args in sys.argv[1:]]"


def lit_ppo(commands: list[list[str]], cwd: Path, log: Path, on_signal: dict,
            started: Optional[Callable[[int], None]] = None) -> tuple[int, float]:
    """``python -m lit_ppo`` command lines run one after the other in one process, output appended to ``log``;
    (exit status, wall seconds); ``started`` gets the process's pid. A signal to the runner is passed on as SIGTERM
    (a fit finishes its rollout, saves last.ckpt and exits) and raises Stopped."""
    cwd.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with log.open("a") as out:
        for args in commands:
            out.write(f"\n$ (cd {cwd}) python -m lit_ppo {shlex.join(args)}\n")
        out.flush()
        argv = [sys.executable, "-m", "lit_ppo", *commands[0]] if len(commands) == 1 else [
            sys.executable, "-c", COMMANDS, *map(json.dumps, commands)]
        proc = subprocess.Popen(argv, cwd=cwd, env=child_env(), stdout=out, stderr=subprocess.STDOUT)
        on_signal["proc"] = proc
        try:
            if started is not None:
                started(proc.pid)
            proc.wait()
        except BaseException:  # the runner failing must not leave its fit behind
            proc.terminate()
            proc.wait()
            raise
        finally:
            on_signal["proc"] = None
    on_signal["wall"] = time.perf_counter() - start
    if on_signal.get("stopped"):
        raise Stopped
    return proc.returncode, on_signal["wall"]


def checkpoint(directory: Path, name: str) -> Optional[Path]:
    found = sorted(directory.glob(f"runs/**/checkpoints/{name}"))
    return found[0] if found else None


def evaluate(config: Path, checkpoints: dict[str, Path], directory: Path, episodes: int,
             on_signal: dict, fit_args: Optional[list[str]] = None) -> dict[str, dict]:
    """``validate`` of each checkpoint (label -> path) on ``episodes`` deterministic episodes, in one process, each
    read back from its own CSV log; with the fit's extra arguments, so that an env they changed (``--data.env_id
    Humanoid-v4``) is the one evaluated (lit_ppo refuses a checkpoint of another env)."""
    commands = []
    for label, ckpt in checkpoints.items():
        logs = directory / "eval" / label
        for old in logs.rglob("metrics.csv"):
            old.unlink()  # a retried evaluation must not read the one before it
        commands.append(["validate", "--config", str(config), "--ckpt_path", str(ckpt), *(fit_args or []),
                         "--data.eval_episodes", str(episodes),
                         "--trainer.logger", "lightning.pytorch.loggers.CSVLogger", "--trainer.logger.save_dir",
                         str(logs), "--trainer.logger.name", "", "--trainer.logger.version", "0", *QUIET])
    code, wall = lit_ppo(commands, directory, directory / "process.log", on_signal)
    if code != 0:
        raise RuntimeError(f"validate failed (exit {code}); see {directory / 'process.log'}")
    results = {}
    for label, ckpt in checkpoints.items():
        metrics = next((directory / "eval" / label).rglob("metrics.csv"))
        [row] = [r for r in csv.DictReader(metrics.open()) if r.get("eval/return_mean")]
        results[label] = {"checkpoint": str(ckpt.relative_to(directory)), "episodes": episodes,
                          "env_steps": int(float(row["step"])), "return_mean": float(row["eval/return_mean"]),
                          "return_std": float(row["eval/return_std"]), "length_mean": float(row["eval/length_mean"])}
    results["wall_s"] = round(wall, 1)
    return results


def write_curves(directory: Path) -> None:
    """The run's training and evaluation returns against env steps, its logger versions merged in order (a resumed
    run's later version wins where both logged the same step), thinned to MAX_CURVE_POINTS rollout points, as
    ``curves/metrics.csv`` (small enough to commit; ``lit_ppo plot`` reads it)."""
    if str(REPO) not in sys.path:  # this checkout's lit_ppo, as the fits use (harness.child_env)
        sys.path.insert(0, str(REPO))
    from lit_ppo.tools.plot import find_runs, read_run  # CSV or TensorBoard, as the config logs

    merged: dict[str, dict[int, float]] = {m: {} for m in CURVE_METRICS}
    versions = sorted(find_runs(directory / "runs"), key=lambda p: int(p.name.split("_")[-1]) if "_" in p.name else 0)
    for version in versions:
        scalars = read_run(version)
        for metric in CURVE_METRICS:
            merged[metric].update(scalars.get(metric, {}))
    rollout_steps = sorted(merged[CURVE_METRICS[0]])
    stride = max(1, -(-len(rollout_steps) // MAX_CURVE_POINTS))
    keep = set(rollout_steps[stride - 1::stride]) | set(rollout_steps[-1:]) | set(merged[CURVE_METRICS[1]])
    (directory / "curves").mkdir(exist_ok=True)
    with (directory / "curves" / "metrics.csv").open("w", newline="") as f:  # CSVLogger's name: plot reads it
        writer = csv.writer(f)
        writer.writerow(["step", *CURVE_METRICS])
        for step in sorted(keep):
            writer.writerow([step, *(merged[m].get(step, "") for m in CURVE_METRICS)])


def run_one(config: Path, seed: int, timesteps: Optional[int], episodes: int, fit_args: list[str], out: Path,
            on_signal: dict) -> Optional[dict]:
    published_budget = int(read_config(config)["data"]["total_timesteps"])
    budget = timesteps or published_budget
    directory = run_dir(out, config, budget, seed)
    result_path, progress_path, sha = directory / "result.json", directory / "fit.json", config_sha(config)
    for path in (result_path, progress_path):  # the result, or an unfinished run, of other settings: set aside
        if path.exists() and not same_settings(json.loads(path.read_text()), config):
            set_aside(directory, json.loads(path.read_text()).get("config_sha", "unhashed"))
    if result_path.exists():
        print(f"skip {config.name} seed {seed} at {budget:,} steps: {result_path} exists", flush=True)
        return None
    directory.mkdir(parents=True, exist_ok=True)
    progress = (json.loads(progress_path.read_text()) if progress_path.exists()
                else {"config_sha": sha, "attempts": [], "done": False})
    if not progress["done"]:
        last_saved = checkpoint(directory, "last.ckpt")
        if progress["attempts"] and progress["attempts"][-1]["exit"] == "running":
            close_killed_attempt(progress["attempts"][-1], directory, last_saved)
        resume, code_version = last_saved is not None, commit()
        args = ["fit", "--config", str(config), "--seed_everything", str(seed), *QUIET, *fit_args,
                *(["--data.total_timesteps", str(timesteps)] if timesteps else []),
                *(["--ckpt_path", "last"] if resume else [])]
        print(f"fit {config.name} seed {seed} at {budget:,} steps{' (resuming)' if resume else ''} in {directory}",
              flush=True)
        attempt = {"wall_s": 0.0, "exit": "running", "resumed": resume, "commit": code_version, "started": time.time()}
        progress["attempts"].append(attempt)  # written first, so that a driver killed outright leaves a trace
        write_json(progress_path, progress)

        def started(pid: int) -> None:  # the fit's pid, so that a fit left running by a killed driver is found
            attempt["pid"] = pid
            write_json(progress_path, progress)

        try:
            code, wall = lit_ppo([args], directory, directory / "process.log", on_signal, started)
        except Stopped:
            attempt.update(wall_s=round(on_signal["wall"], 1), exit="stopped")
            write_json(progress_path, progress)
            raise
        except BaseException:  # the runner's own failure, not a kill: say so rather than leave "running"
            attempt.update(wall_s=round(time.time() - attempt["started"], 1), exit="error")
            write_json(progress_path, progress)
            raise
        attempt.update(wall_s=round(wall, 1), exit=code)
        progress["done"] = code == 0
        write_json(progress_path, progress)
        if code != 0:
            raise RuntimeError(f"fit failed (exit {code}); see {directory / 'process.log'}")
    last, best = checkpoint(directory, "last.ckpt"), checkpoint(directory, "best.ckpt")
    if last is None:
        raise RuntimeError(f"{config.name}: the fit in {directory} finished without a last.ckpt (a config whose "
                           "checkpoint callback has no relative dirpath?)")
    evaluations = evaluate(config, {"final": last, **({"best": best} if best else {})}, directory, episodes, on_signal,
                           fit_args)
    final, best_eval = evaluations["final"], evaluations.get("best")
    write_curves(directory)
    result = {
        "config": config.name, "config_sha": sha, "env_id": read_config(config)["data"]["env_id"], "seed": seed,
        "total_timesteps": budget, "published_timesteps": published_budget,
        "budget_overridden": budget != published_budget,
        "fit_args": fit_args, "final": final, "best": best_eval, "eval_wall_s": evaluations["wall_s"],
        "fit_wall_s": round(sum(a["wall_s"] for a in progress["attempts"]), 1),
        "fit_attempts": len(progress["attempts"]),
        "fit_attempts_killed": sum(a["exit"] == "killed" for a in progress["attempts"]),
        "cpu": cpu_model(), "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d"),
        # the code each fit process ran (a resumed run may span several); older fit.json files did not record it
        "commits": sorted({a.get("commit", "?") for a in progress["attempts"]}), "evaluated_with": commit(),
    }
    write_json(result_path, result)
    best_text = f", best.ckpt {best_eval['return_mean']:.1f}" if best_eval else ""
    print(f"  final {final['return_mean']:.1f} +- {final['return_std']:.1f}{best_text} "
          f"({result['fit_wall_s'] / 60:.1f} min)", flush=True)
    return result


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", nargs="+", help="shipped config names or paths (default: every shipped config)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--timesteps", type=int, help="budget instead of the config's data.total_timesteps")
    parser.add_argument("--eval-episodes", type=int, default=20, help="deterministic episodes per evaluation")
    parser.add_argument("--fit-args", default="", help="extra fit arguments, one string (recorded in the result)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the runs go")
    parser.add_argument("--report", type=Path, default=REPO / "docs" / "results.md", help="markdown to write")
    parser.add_argument("--report-only", action="store_true", help="rebuild the report from OUT, run nothing")
    args = parser.parse_args(argv)
    for name, value in (("--timesteps", args.timesteps), ("--eval-episodes", args.eval_episodes)):
        if value is not None and value <= 0:
            parser.error(f"{name} must be positive, got {value}")
    configs = [Path(c) if Path(c).is_file() else CONFIG_DIR / c for c in args.configs or []] or sorted(
        CONFIG_DIR.glob("*.yaml"))
    missing = [str(c) for c in configs if not c.is_file()]
    if missing:
        parser.error(f"--configs: no such config {', '.join(missing)} (shipped: "
                     f"{', '.join(p.name for p in sorted(CONFIG_DIR.glob('*.yaml')))})")
    on_signal: dict = {"proc": None, "stopped": False}

    def stop(signum, frame):
        on_signal["stopped"] = True
        if on_signal["proc"] is not None and on_signal["proc"].poll() is None:
            print(f"{signal.Signals(signum).name}: asking the fit to save last.ckpt and stop", flush=True)
            on_signal["proc"].send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    failures = ran = 0
    if not args.report_only:
        for config in configs:
            for seed in args.seeds:
                try:
                    if not run_one(config.resolve(), seed, args.timesteps, args.eval_episodes,
                                   shlex.split(args.fit_args), args.out, on_signal):
                        continue  # skipped: nothing new to report
                except Stopped:
                    print("stopped; run the same command again to continue", flush=True)
                    return 130
                except RuntimeError as err:
                    print(f"  {err}", flush=True)
                    failures += 1
                    continue
                ran += 1
                print(f"report: {write_report(args.out, args.report)}", flush=True)  # after each run: as they come
    if not ran:
        print(f"report: {write_report(args.out, args.report)}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

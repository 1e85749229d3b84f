"""What the benchmark scripts share: running one arm in its own process (wall time and that process's peak RSS),
the lit_ppo command line for a set of hyperparameters, and reading lit_ppo's CSV metrics back.

Standard library only: the launching process must stay small, because on Linux a child's peak RSS also counts
the address space it was started from (exec records the launcher's high-water mark).
"""

import csv
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent


@dataclass
class Run:
    returncode: int
    launched_at: float  # time.time() just before the process was started
    wall_s: float  # launch to exit
    peak_rss_mb: float  # the process's own high-water mark (its children not included)
    log: str  # stdout and stderr together
    cpu_s: float = 0.0  # user + system CPU seconds of the process and of the children it joined


def child_env() -> dict:
    """The environment of an arm's process: the benchmarks and the repository importable (probes, workers).
    A PYTHONPATH given to the benchmark comes first, so that a copy of lit_ppo can be measured in its place."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(BENCH_DIR), str(REPO)) if p)
    return env


def run_process(cmd: list, cwd: Path, timeout: float = 3600) -> Run:
    """Run ``cmd`` to completion; ``os.wait4`` gives this child's own resource usage, so peak RSS is per run."""
    cwd.mkdir(parents=True, exist_ok=True)
    log_path = cwd / "process.log"
    with open(log_path, "w") as log:
        launched_at, start = time.time(), time.perf_counter()
        proc = subprocess.Popen([str(c) for c in cmd], cwd=cwd, env=child_env(), stdout=log, stderr=subprocess.STDOUT)
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Run(proc.returncode, launched_at, wall, usage.ru_maxrss / 1024, log_path.read_text(),
               usage.ru_utime + usage.ru_stime)


def check(run: Run, what: str) -> Run:
    if run.returncode != 0:
        raise SystemExit(f"{what} failed (exit {run.returncode}):\n{run.log[-4000:]}")
    return run


def iterations(hp: dict) -> int:
    """Rollouts in the budget: every arm trains whole rollouts only."""
    return hp["total_timesteps"] // (hp["num_envs"] * hp["num_steps"])


def installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def median(values: list) -> float:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def median_after_first(times_ms: list) -> float:
    """The median of per-rollout times, the first rollout's (warm-up, compilation) left out."""
    return median(times_ms[1:] or times_ms)


def read_json_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# -- lit_ppo through its CLI -------------------------------------------------------------------------------------
def lit_ppo_args(hp: dict, seed: int, threads: Optional[int]) -> list[str]:
    """``fit`` overrides that give lit_ppo the hyperparameters ``hp`` (see compare.SETTINGS for the keys)."""
    rollout = hp["num_envs"] * hp["num_steps"]
    return [
        "--seed_everything", seed, "--torch_threads", "null" if threads is None else threads,
        "--data.num_envs", hp["num_envs"], "--data.num_steps", hp["num_steps"],
        "--data.minibatch_size", rollout // hp["num_minibatches"], "--data.update_epochs", hp["update_epochs"],
        "--data.gamma", hp["gamma"], "--data.gae_lambda", hp["gae_lambda"],
        "--data.total_timesteps", hp["total_timesteps"], "--data.eval_episodes", 20,
        "--model.lr", hp["lr"], "--model.anneal_lr", hp["anneal_lr"], "--model.clip_coef", hp["clip_coef"],
        "--model.anneal_clip", hp["anneal_clip"], "--model.ent_coef", hp["ent_coef"],
        "--model.vf_coef", hp["vf_coef"], "--model.clip_vloss", "false", "--model.norm_adv", "true",
        "--model.max_grad_norm", hp["max_grad_norm"],
    ]


def lit_ppo_cmd(config: str, args: list, callbacks: Optional[list] = None, python: str = sys.executable) -> list:
    """``python -m lit_ppo fit`` logging to CSV under ./csv, without checkpoints or a progress bar."""
    return [
        python, "-m", "lit_ppo", "fit", "--config", config, *args,
        "--trainer.logger", "lightning.pytorch.loggers.CSVLogger", "--trainer.logger.save_dir", "csv",
        "--trainer.logger.name", "run", "--trainer.enable_checkpointing", "false",
        "--trainer.enable_progress_bar", "false", "--trainer.callbacks", json.dumps(callbacks or []),
    ]


def read_lit_ppo_metrics(cwd: Path) -> tuple[list[dict], list[float]]:
    """(rollout rows, evaluation returns) of the CSV logger's metrics.csv under ``cwd``."""
    [path] = cwd.glob("csv/run/version_*/metrics.csv")
    rows = list(csv.DictReader(path.open()))
    rollouts = [{k: float(v) for k, v in r.items() if v} for r in rows if r.get("time/env_steps")]
    evals = [float(r["eval/return_mean"]) for r in rows if r.get("eval/return_mean")]
    return rollouts, evals

"""Archived study.

Last run 2026-12-01 on a shared 2-core Intel Xeon (``pendulum.yaml`` after the redesign, in the README at
1a0c6fc); last changed at ffea868 (2026-11-29).
Question: what does a shipped config score per seed, fitted and its ``last.ckpt`` validated through the CLI?
Answer: ``pendulum.yaml`` -169.1 / -185.7 / -168.0 (seeds 1-3, 198,656 steps); ``benchmarks/learning.py``
replaced it for every config (docs/results.md) at 59d5ecc.
Not maintained or tested: it may need commit ffea868 to run (``git worktree add DIR ffea868``).

Train a shipped config for several seeds through the CLI, then evaluate each run's last checkpoint.

Per seed, in a fresh process each, as a user runs it: ``fit --config C --seed_everything S``, then
``validate --config C --ckpt_path <last.ckpt>`` (the config's ``eval_episodes`` deterministic episodes).
Extra arguments go to both commands (e.g. ``--data.total_timesteps 4096`` for a smoke run, or another env id).

    python benchmarks/archive/fit_validate_seeds.py --config pendulum.yaml [--seeds 1 2 3] [--target -250] [fit args...]
"""

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUIET = ["--trainer.enable_progress_bar", "false"]


def run(args: list[str], cwd: Path) -> str:
    proc = subprocess.run([sys.executable, "-m", "lit_ppo", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"failed: lit_ppo {' '.join(args)}\n{proc.stderr[-3000:]}")
    return proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="pendulum.yaml")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--target", type=float, default=None, help="report whether each eval return reaches it")
    args, fit_args = parser.parse_known_args()
    print(f"{'seed':>4} {'eval return':>11} {'+- std':>7} {'fit wall s':>10}" + ("  >= target" if args.target else ""))
    for seed in args.seeds:
        with tempfile.TemporaryDirectory() as tmp:
            cwd = Path(tmp)
            start = time.perf_counter()
            run(["fit", "--config", args.config, "--seed_everything", str(seed), *QUIET, *fit_args], cwd)
            wall = time.perf_counter() - start
            [ckpt] = cwd.glob("runs/*/checkpoints/last.ckpt")
            out = run(["validate", "--config", args.config, "--ckpt_path", str(ckpt), "--trainer.logger", "false",
                       *QUIET, *fit_args], cwd)
            mean, std = (float(re.search(rf"eval/return_{k}\s+(\S+)", out).group(1)) for k in ("mean", "std"))
            hit = f"  {mean >= args.target}" if args.target is not None else ""
            print(f"{seed:>4} {mean:>11.1f} {std:>7.1f} {wall:>10.1f}{hit}", flush=True)


if __name__ == "__main__":
    main()

"""Archived study.

Measured 2026-12-01 on a shared 2-core Intel Xeon (docs/zoo.md's CartPole table; sync against native vector envs
in docs/performance.md, committed at 18ec213); last changed at 9dff592 (2026-11-29).
Question: after how many environment steps does ``cartpole.yaml`` first reach a 20-episode evaluation of 475,
seed by seed, through the CLI? Answer: 12,800 / 20,480 / 15,360 for seeds 1-3 (median 15,360, the same with
``--data.vectorization native``), every seed at 500 by 100k; ``learning.py`` and ``time_to_solve.py`` replace it.
Not maintained or tested: it may need commit 9dff592 to run (``git worktree add DIR 9dff592``).

Train a config for several seeds through the CLI and report when each first reaches a target eval return.

Evaluation (20 deterministic episodes on fresh envs) runs every ``--eval-every`` iterations during fit, so
"steps to target" has that granularity. Each seed runs in its own process, as a user would run it.

    python benchmarks/archive/cartpole_seeds.py [--config cartpole.yaml] [--seeds 1 2 3] [--eval-every 10] [--target 475]
"""

import argparse
import csv
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_seed(config: str, seed: int, eval_every: int, workdir: Path, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "lit_ppo", "fit", "--config", config, "--seed_everything", str(seed),
           "--trainer.check_val_every_n_epoch", str(eval_every), "--trainer.enable_progress_bar", "false",
           "--trainer.logger", "lightning.pytorch.loggers.CSVLogger", "--trainer.logger.save_dir", str(workdir),
           "--trainer.logger.name", f"seed{seed}", "--trainer.callbacks", "[]", "--trainer.enable_checkpointing",
           "false", *extra]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - start
    [metrics] = workdir.glob(f"seed{seed}/version_*/metrics.csv")
    rows = list(csv.DictReader(metrics.open()))
    # Validation during fit runs before the epoch's on_train_epoch_end, so an evaluation row precedes the row
    # of the rollout it evaluated: pair each evaluation with the next rollout row.
    pending, evals, last_rollout = [], [], None
    for row in rows:
        if row.get("eval/return_mean"):
            pending.append(float(row["eval/return_mean"]))
        if row.get("time/env_steps"):
            last_rollout = row
            evals += [(float(row["time/env_steps"]), float(row["time/elapsed_s"]), ret) for ret in pending]
            pending = []
    return {"seed": seed, "wall_s": wall, "evals": evals, "final_sps": float(last_rollout["time/sps"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="cartpole.yaml")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--target", type=float, default=475.0)
    args, extra = parser.parse_known_args()
    print(f"{'seed':>4} {'first >= target: env steps':>27} {'fit s':>7} {'final eval':>10} {'time/sps':>9} "
          f"{'process s':>9}")
    reached = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            r = run_seed(args.config, seed, args.eval_every, Path(tmp), extra)
            hit = next(((steps, secs) for steps, secs, ret in r["evals"] if ret >= args.target), None)
            final = r["evals"][-1][2] if r["evals"] else float("nan")
            steps, secs = hit if hit else (float("nan"), float("nan"))
            reached.append(hit)
            print(f"{seed:>4} {steps:>27.0f} {secs:>7.1f} {final:>10.1f} {r['final_sps']:>9.0f} {r['wall_s']:>9.1f}")
    hits = [h for h in reached if h]
    if hits:
        print(f"median env steps to {args.target:g}: {statistics.median(h[0] for h in hits):.0f}; "
              f"median fit seconds: {statistics.median(h[1] for h in hits):.1f}; reached in {len(hits)}/{len(reached)}")


if __name__ == "__main__":
    main()

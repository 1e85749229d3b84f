"""``data.overlap`` against the synchronous path: SPS and CPU use, side by side in one invocation.

Workloads (``--workloads``): ``lunarlander`` (LunarLander-v3 with the package defaults before 2026-12-06, no config: 4
envs x 512 steps, 10 epochs of minibatches of 64, rewards scaled, no KL stop) and ``halfcheetah`` (``configs/halfcheetah.yaml``: 1 env x 2,048 steps, 10
epochs of 64; needs MuJoCo). For each seed, the two arms run back to back, in alternating order, each a ``fit`` of
``--iterations`` rollouts in its own process (CSV logger, no checkpoints, no evaluation). SPS is the steady
state: environment steps over training seconds from the end of rollout ``--warmup`` to the end of the last (the
collector's start-up and the first rollouts left out). CPU use is the process's CPU seconds (the collector's
included: the learner joins it) over its wall seconds and the machine's cores. Printed: each run, then per
workload the medians over seeds and the overlapped/synchronous SPS ratio seed by seed and of the medians.

    python benchmarks/overlap.py [--workloads lunarlander halfcheetah] [--seeds 1 2 3] [--iterations 20]
"""

import argparse
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

from harness import check, median, read_lit_ppo_metrics, run_process

WORKLOADS = {
    # the package defaults as this workload's figures were measured (before 2026-12-06: rewards scaled, no KL stop;
    # first episodes not staggered)
    "lunarlander": ["--data.env_id", "LunarLander-v3", "--data.normalize_reward", "true", "--model.target_kl", "null",
                    "--data.stagger_episodes", "false"],
    "halfcheetah": ["--config", "halfcheetah.yaml"],
}
NEEDS = {"lunarlander": "Box2D", "halfcheetah": "mujoco"}
ARMS = {"sync": "false", "overlap": "true"}


def run_arm(workload: str, arm: str, seed: int, iterations: int, warmup: int, cwd: Path) -> dict:
    cmd = [sys.executable, "-m", "lit_ppo", "fit", *WORKLOADS[workload], "--seed_everything", seed,
           "--data.overlap", ARMS[arm], "--trainer.max_epochs", iterations, "--trainer.limit_val_batches", 0,
           "--trainer.logger", "lightning.pytorch.loggers.CSVLogger", "--trainer.logger.save_dir", "csv",
           "--trainer.logger.name", "run", "--trainer.enable_checkpointing", "false",
           "--trainer.enable_progress_bar", "false", "--trainer.callbacks", "[]"]
    run = check(run_process(cmd, cwd), f"{workload} {arm} seed {seed}")
    rows, _ = read_lit_ppo_metrics(cwd)
    first, last = rows[warmup - 1], rows[-1]
    sps = (last["time/env_steps"] - first["time/env_steps"]) / (last["time/elapsed_s"] - first["time/elapsed_s"])
    phases = {key: median([r.get(f"time/{key}") for r in rows[warmup:]])
              for key in ("learn_ms", "env_ms", "act_ms", "rollout_wait_ms", "weights_wait_ms", "iteration_ms")}
    return dict(workload=workload, arm=arm, seed=seed, sps=sps, cpu=run.cpu_s / run.wall_s / os.cpu_count(),
                wall_s=run.wall_s, **phases)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3, help="rollouts left out of the SPS")
    args = parser.parse_args()
    if args.iterations <= args.warmup:
        parser.error("--iterations must exceed --warmup")
    workloads = [w for w in args.workloads if importlib.util.find_spec(NEEDS[w]) is not None]
    for w in set(args.workloads) - set(workloads):
        print(f"overlap: {w} not run: needs {NEEDS[w]} (pip install 'lit_ppo[box2d,mujoco]')")
    print(f"overlap: {os.cpu_count()} cores, seeds {args.seeds}, {args.iterations} rollouts a run, SPS after the "
          f"first {args.warmup}")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for rep, seed in enumerate(args.seeds):
            for workload in workloads:
                order = list(ARMS) if rep % 2 == 0 else list(ARMS)[::-1]  # each arm first on alternate seeds
                for arm in order:
                    r = run_arm(workload, arm, seed, args.iterations, args.warmup, Path(tmp) / f"{workload}-{arm}-{seed}")
                    results.append(r)
                    print(f"  {workload} {arm} seed {seed}: {r['sps']:.0f} SPS, CPU {r['cpu']:.0%} of the machine, "
                          f"learn {r['learn_ms']:.0f} ms, env {r['env_ms']:.0f} ms, act {r['act_ms']:.0f} ms, waits "
                          f"learner {r['rollout_wait_ms']:.0f} / collector {r['weights_wait_ms']:.0f} ms", flush=True)
    print(f"\n{'workload':<12} {'arm':<8} {'SPS med':>8} {'CPU med':>8} {'learn ms':>9} {'env+act ms':>11} "
          f"{'learner waits':>14} {'collector waits':>16}")
    for workload in workloads:
        meds = {}
        for arm in ARMS:
            runs = [r for r in results if r["workload"] == workload and r["arm"] == arm]
            meds[arm] = median([r["sps"] for r in runs])
            print(f"{workload:<12} {arm:<8} {meds[arm]:>8.0f} {median([r['cpu'] for r in runs]):>8.0%} "
                  f"{median([r['learn_ms'] for r in runs]):>9.1f} "
                  f"{median([r['env_ms'] + r['act_ms'] for r in runs]):>11.1f} "
                  f"{median([r['rollout_wait_ms'] for r in runs]):>14.1f} "
                  f"{median([r['weights_wait_ms'] for r in runs]):>16.1f}")
        paired = {r["seed"]: r["sps"] for r in results if r["workload"] == workload and r["arm"] == "overlap"}
        per_seed = [paired[r["seed"]] / r["sps"] for r in results if r["workload"] == workload and r["arm"] == "sync"]
        print(f"{workload}: overlap/sync SPS {meds['overlap'] / meds['sync']:.2f}x of the medians; per seed "
              + " ".join(f"{x:.2f}x" for x in per_seed))


if __name__ == "__main__":
    main()

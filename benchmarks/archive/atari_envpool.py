"""Archived study.

Measured 2026-12-01 on a shared 2-core Intel Xeon (envpool 1.2.5, ale-py 0.12.1; docs/performance.md, committed
at 18ec213); last changed at a7a5769 (2026-12-02).
Question: does ``breakout_envpool.yaml`` (EnvPool) train Breakout faster than ``breakout.yaml`` (AsyncVectorEnv)?
Answer: barely, 186 against 176 SPS (1.06x): on 2 CPU cores the Nature-CNN update is ~85% of an iteration.
Not maintained or tested: it may need commit a7a5769 to run (``git worktree add DIR a7a5769``). It imports the
helpers in benchmarks/, so run it as ``PYTHONPATH=benchmarks python benchmarks/archive/atari_envpool.py``.

Atari Breakout SPS: ``configs/breakout_envpool.yaml`` (EnvPool, its own preprocessing, next-step autoreset)
against ``configs/breakout.yaml`` (gymnasium's AtariPreprocessing and frame stack in an AsyncVectorEnv), same
PPO settings, on this machine, in the same invocation with the arms alternating.

Each run is a short ``fit`` through the CLI (``--iterations`` rollouts of 8 envs x 128 steps, the shipped
update: 4 epochs x 4 minibatches, no evaluation); reported per arm: median SPS over the repeats (environment steps
per second over iterations 2..N, from lit_ppo's own ``time/iteration_ms``) and the share of an iteration spent
stepping environments. breakout.yaml needs ``pip install "lit_ppo[atari]"``, breakout_envpool.yaml
``pip install "lit_ppo[envpool]"``; an arm whose package is missing is reported as such.

    python benchmarks/archive/atari_envpool.py [--iterations 6] [--repeats 2]
"""

import argparse
import tempfile
from pathlib import Path

from harness import check, installed, lit_ppo_cmd, median, read_lit_ppo_metrics, run_process

ARMS = {"breakout.yaml (async + gymnasium wrappers)": ("breakout.yaml", "ale_py"),
        "breakout_envpool.yaml (EnvPool)": ("breakout_envpool.yaml", "envpool")}


def run_arm(config: str, iterations: int, cwd: Path) -> tuple[float, float]:
    args = ["--data.total_timesteps", str(iterations * 8 * 128), "--trainer.limit_val_batches", "0"]
    check(run_process(lit_ppo_cmd(config, args), cwd), config)
    rows, _ = read_lit_ppo_metrics(cwd)
    assert len(rows) >= 2, f"{config}: {len(rows)} iteration(s) logged; SPS needs two or more"
    timed = rows[1:]  # the first iteration pays for start-up
    # the environment steps of the timed iterations, as logged (whatever the config's num_envs x num_steps)
    steps = rows[-1]["time/env_steps"] - rows[0]["time/env_steps"]
    total_ms = sum(r["time/iteration_ms"] for r in timed)
    return steps / (total_ms / 1e3), sum(r["time/env_ms"] for r in timed) / total_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in ARMS}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args.repeats):
            for name, (config, module) in ARMS.items():
                if installed(module):
                    results[name].append(run_arm(config, args.iterations, Path(tmp) / f"{repeat}-{config}"))
    print(f"Breakout, 8 envs x 128 steps, {args.iterations} iterations (SPS over iterations 2..N), "
          f"median of {args.repeats} runs per arm")
    print(f"{'arm':<45} {'SPS':>8} {'env share':>10}")
    sps = {}
    for name, runs in results.items():
        if not runs:
            print(f"{name:<45} {'not run: ' + ARMS[name][1] + ' is not installed':>19}")
            continue
        sps[name] = median([r[0] for r in runs])
        print(f"{name:<45} {sps[name]:>8.0f} {median([r[1] for r in runs]):>10.1%}")
    if len(sps) == 2:
        base, envpool = (sps[name] for name in ARMS)
        print(f"EnvPool/async SPS: {envpool / base:.2f}x")


if __name__ == "__main__":
    main()

"""Archived study.

Measured 2026-12-03 on a 2-core AMD EPYC (Zen 3) (docs/performance.md, committed at eb989cb); last changed at
0f23b27 (2026-12-04: import path after the layout move).
Question: how long does a ``data.overlap`` collector take from its start to its first rollout? Answer: 1.55 s
(median of 6) once the collector process stopped importing Lightning (b7aa02c), against 5.02 s at 748af20.
Not maintained or tested: it may need commit 0f23b27 to run (``git worktree add DIR 0f23b27``).

How long a ``data.overlap`` collector takes from its start to its first rollout: spawning the process, its
imports, building CartPole-v1's 4 environments and collecting one 4 x 32-step rollout. The learner waits this
long once per fit (and once per resume), so it counts against short runs.

    python benchmarks/archive/collector_startup.py [--repeats 6]

To compare two versions of lit_ppo, run it with ``PYTHONPATH`` pointing at each checkout (``git worktree add``).
A user script that imports lit_ppo or Lightning at its top level has its collector import them too (spawn re-imports
the main script): keep such imports under ``if __name__ == "__main__":`` to start as fast as the CLI does.
"""

import argparse
import statistics
import time


def main() -> None:
    # Imported here, not at the top: a spawned process re-imports the script that started it (``python -m lit_ppo``
    # is the exception), so top-level imports would load Lightning into the collector and time that instead of what
    # the CLI's collector does.
    import lit_ppo
    from lit_ppo import PPODataModule, PPOModule
    from lit_ppo.collection.overlap.dataset import OverlappedRolloutDataset

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=6)
    args = parser.parse_args()
    data = PPODataModule(env_id="CartPole-v1", num_envs=4, num_steps=32, total_timesteps=4 * 32 * 100, overlap=True,
                         seed=1)
    model = PPOModule(env_spec=data.env_spec)
    seconds = []
    for _ in range(args.repeats):
        dataset = OverlappedRolloutDataset(data.rollout_recipe(), model.policy, None)
        start = time.perf_counter()
        next(iter(dataset))
        seconds.append(time.perf_counter() - start)
        dataset.close()
    print(f"lit_ppo at {lit_ppo.__file__}")
    print(f"collector start to first rollout: median {statistics.median(seconds):.2f} s over {args.repeats} "
          f"(each: {', '.join(f'{s:.2f}' for s in seconds)})")


if __name__ == "__main__":  # the collector is spawned: it must not rerun this file's work
    main()

"""Archived study.

Measured 2026-12-02 on a 2-core AMD EPYC (Zen 5) (docs/performance.md, committed at 7eb08d4; earlier on the Xeon,
2026-12-01); last changed at 6669d62 (2026-12-01).
Question: does ``model.compile`` pay for itself within a fit? Answer: compiled updates take 0.72-0.76x the eager
time, but compiling takes 2.4-3.4 s with a warm inductor cache (11.9 s cold), more than a 100k-step CartPole fit
saves (fit SPS 0.86-0.95x of eager): ``model.compile`` stays off by default.
Not maintained or tested: it may need commit 6669d62 to run (``git worktree add DIR 6669d62``). It imports the
helpers in benchmarks/, so run it as ``PYTHONPATH=benchmarks python benchmarks/archive/compile_effect.py``.

What ``model.compile`` does to a fit: the update loop's time per iteration once compiled, the compile time it
adds at start-up, and SPS over the whole fit, against ``model.compile false`` in the same invocation.

Each run is ``python -m lit_ppo fit --config C`` in its own process (CSV logger, no checkpoints or evaluation), the
two arms alternating ``--repeats`` times. ``learn_ms`` is the module's own timer of ``training_step``; the first
iteration of a compiled run holds the compilation, so "compile s" is its ``learn_ms`` minus the steady median.

    python benchmarks/archive/compile_effect.py [--config cartpole.yaml] [--total-timesteps 51200] [--repeats 2] [-- ARGS]
"""

import argparse
import statistics
import tempfile
from pathlib import Path

from harness import check, lit_ppo_cmd, read_lit_ppo_metrics, run_process


def run(config: str, compile: bool, steps: int, cwd: Path, extra: list) -> dict:
    args = ["--data.total_timesteps", steps, "--model.compile", str(compile).lower(), "--trainer.limit_val_batches", 0,
            *extra]
    check(run_process(lit_ppo_cmd(config, args), cwd), f"compile={compile}")
    rows, _ = read_lit_ppo_metrics(cwd)
    learn = [r["time/learn_ms"] for r in rows]
    steady = statistics.median(learn[1:])
    return {"learn_ms": steady, "act_ms": statistics.median(r["time/act_ms"] for r in rows[1:]),
            "compile_s": (learn[0] - steady) / 1e3, "sps": rows[-1]["time/sps"],
            "steady_sps": rows[-1]["time/env_steps"] / len(rows) / (statistics.median(r["time/iteration_ms"]
                                                                                     for r in rows[1:]) / 1e3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="cartpole.yaml")
    parser.add_argument("--total-timesteps", type=int, default=51_200)
    parser.add_argument("--repeats", type=int, default=2)
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]
    results: dict[bool, list] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeats):
            for compile in ((False, True) if rep % 2 == 0 else (True, False)):
                results[compile].append(run(args.config, compile, args.total_timesteps,
                                            Path(tmp) / f"{compile}-{rep}", extra))
    print(f"model.compile on {args.config} {' '.join(extra)}, {args.total_timesteps} steps, {args.repeats} runs each")
    print(f"{'compile':<8} {'learn ms/iter':>14} {'act ms/iter':>12} {'compile s':>10} {'steady SPS':>11} {'fit SPS':>8}")
    med = {}
    for compile, runs in results.items():
        med[compile] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        m = med[compile]
        print(f"{str(compile):<8} {m['learn_ms']:14.2f} {m['act_ms']:12.2f} {m['compile_s']:10.2f} "
              f"{m['steady_sps']:11.0f} {m['sps']:8.0f}")
    print(f"compiled/eager: learn time {med[True]['learn_ms'] / med[False]['learn_ms']:.2f}x, steady SPS "
          f"{med[True]['steady_sps'] / med[False]['steady_sps']:.2f}x, fit SPS {med[True]['sps'] / med[False]['sps']:.2f}x")


if __name__ == "__main__":
    main()

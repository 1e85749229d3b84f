"""lit_ppo against Stable-Baselines3 PPO and a CleanRL-style PPO loop, on CartPole-v1, same hyperparameters.

Settings (``--settings``):
- ``zoo``: RL-Zoo's CartPole PPO: 8 envs x 32 steps, one minibatch of 256, 20 epochs, gamma 0.98, lambda 0.8,
  lr 1e-3 and clip 0.2 annealed linearly, no entropy bonus, 100k steps.
- ``cleanrl``: CleanRL ``ppo.py``'s defaults: 4 envs x 128 steps, 4 minibatches, 4 epochs, gamma 0.99,
  lambda 0.95, lr 2.5e-4 annealed, clip 0.2, entropy 0.01, 500k steps.
Both: value coefficient 0.5 on 0.5 x MSE (SB3's value loss has no 0.5, so SB3 gets ``vf_coef`` 0.25: the same
loss), no value clipping, per-minibatch advantage normalization, gradient norm 0.5, Adam eps 1e-5, separate
64-64 tanh actor and critic, orthogonal init. Every arm runs with ``--threads`` torch intra-op threads (default
1; 0 = torch's default).

Each run is its own process (its peak RSS is its own): lit_ppo through its CLI (``python -m lit_ppo fit``, CSV
logger, no checkpoints, one deterministic evaluation at the end as Lightning validation), SB3 and the CleanRL
loop as workers of baselines.py. The arm order rotates every seed to cancel machine drift. Reported per arm:
median SPS (environment steps / training seconds), environment steps and training seconds until the running mean
of the last 100 training episodes first reaches ``--target`` (checked after each rollout's updates), the final
deterministic 20-episode evaluation, peak RSS, and where an iteration's time goes: ``learn ms`` (the median time of
one rollout's updates, timed around each arm's update phase; the first rollout's left out) and ``iter ms``
(training seconds per rollout: start-up inside the fit, such as ``model.compile``'s, counts as non-update time);
then the ratios of each lit_ppo arm (``lit_ppo``; ``lit_overlap``: with ``data.overlap``, collection in a process beside
the learner) to SB3 and CleanRL and of the two lit_ppo arms, with the other arm's update and non-update (acting, environment,
GAE, the loop) time per rollout over lit_ppo's, and the SPS ratio seed by seed.

    python benchmarks/compare.py [--settings zoo cleanrl] [--seeds 1 2 3] [--threads 1] [--quick]
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

from harness import (BENCH_DIR, check, installed, iterations, lit_ppo_args, lit_ppo_cmd, median, median_after_first,
                     read_lit_ppo_metrics, run_process)

SETTINGS = {
    "zoo": dict(num_envs=8, num_steps=32, num_minibatches=1, update_epochs=20, gamma=0.98, gae_lambda=0.8,
                lr=1e-3, anneal_lr=True, clip_coef=0.2, anneal_clip=True, ent_coef=0.0, vf_coef=0.5,
                max_grad_norm=0.5, total_timesteps=100_000),
    "cleanrl": dict(num_envs=4, num_steps=128, num_minibatches=4, update_epochs=4, gamma=0.99, gae_lambda=0.95,
                    lr=2.5e-4, anneal_lr=True, clip_coef=0.2, anneal_clip=False, ent_coef=0.01, vf_coef=0.5,
                    max_grad_norm=0.5, total_timesteps=500_000),
}
ARMS = ("lit_ppo", "lit_overlap", "sb3", "cleanrl")
LIT_ARMS = {"lit_ppo": [], "lit_overlap": ["--data.overlap", "true"]}  # lit_overlap: collection beside learning


def run_arm(arm: str, hp: dict, seed: int, threads: int, target: float, cwd: Path, lit_args: list) -> dict:
    if arm in LIT_ARMS:
        # One validation, after the last rollout's updates: the final deterministic evaluation.
        args = lit_ppo_args(hp, seed, threads or None) + ["--trainer.check_val_every_n_epoch", iterations(hp),
                                                          *LIT_ARMS[arm], *lit_args]
        run = check(run_process(lit_ppo_cmd("cartpole.yaml", args), cwd), f"lit_ppo seed {seed}")
        rows, evals = read_lit_ppo_metrics(cwd)
        # The last row's clock includes the final evaluation: SPS from the row before it.
        timed = rows[-2] if len(rows) > 1 else rows[-1]
        hit = next((r for r in rows if r.get("rollout/return_mean", 0) >= target), None)
        result = dict(steps=rows[-1]["time/env_steps"], train_s=timed["time/elapsed_s"] * rows[-1]["time/env_steps"]
                      / timed["time/env_steps"], steps_to_target=hit and hit["time/env_steps"],
                      seconds_to_target=hit and hit["time/elapsed_s"], eval_return=evals[-1],
                      learn_ms=median_after_first([r["time/learn_ms"] for r in rows]))
    else:
        out = cwd / "result.json"
        cmd = [sys.executable, BENCH_DIR / "baselines.py", "--worker", arm, "--hp", json.dumps(hp), "--seed", seed,
               "--threads", threads, "--target", target, "--out", out]
        run = check(run_process(cmd, cwd), f"{arm} seed {seed}")
        result = json.loads(out.read_text())
    result.update(arm=arm, seed=seed, sps=result["steps"] / result["train_s"], peak_rss_mb=run.peak_rss_mb,
                  process_s=run.wall_s)
    return result


def fmt(value, spec: str) -> str:
    return "-" if value is None or value != value else format(value, spec)


def print_table(setting: str, hp: dict, results: list[dict], target: float) -> None:
    print(f"\n{setting}: {hp['num_envs']} envs x {hp['num_steps']} steps, {hp['num_minibatches']} minibatch(es), "
          f"{hp['update_epochs']} epochs, {iterations(hp) * hp['num_envs'] * hp['num_steps']:,} steps, "
          f"seeds {sorted({r['seed'] for r in results})}")
    print(f"{'arm':<11} {'SPS med':>8} {'SPS min-max':>13} {'steps to ' + format(target, 'g'):>14} "
          f"{'train s to':>10} {'solved':>6} {'eval ret':>8} {'train s':>8} {'RSS MB':>7} {'learn ms':>8} "
          f"{'iter ms':>8}")
    meds = {}
    rollout = hp["num_envs"] * hp["num_steps"]
    for arm in ARMS:
        runs = [r for r in results if r["arm"] == arm]
        if not runs:
            continue
        hits = [r for r in runs if r["steps_to_target"] is not None]
        meds[arm] = m = {"sps": median([r["sps"] for r in runs]),
                         "steps": median([r["steps_to_target"] for r in hits]),
                         "secs": median([r["seconds_to_target"] for r in hits]),
                         "rss": median([r["peak_rss_mb"] for r in runs]),
                         "learn": median([r["learn_ms"] for r in runs]),
                         "iter": median([r["train_s"] * 1e3 * rollout / r["steps"] for r in runs])}
        sps = [r["sps"] for r in runs]
        print(f"{arm:<11} {m['sps']:>8.0f} {f'{min(sps):.0f}-{max(sps):.0f}':>13} {fmt(m['steps'], ',.0f'):>14} "
              f"{fmt(m['secs'], '.1f'):>10} {f'{len(hits)}/{len(runs)}':>6} "
              f"{median([r['eval_return'] for r in runs]):>8.1f} {median([r['train_s'] for r in runs]):>8.1f} "
              f"{m['rss']:>7.0f} {m['learn']:>8.2f} {m['iter']:>8.2f}")
    # The arms of one seed run back to back: their ratio cancels drift slower than a seed's runs.
    by_seed = {(r["seed"], r["arm"]): r["sps"] for r in results}
    seeds = sorted({r["seed"] for r in results})
    pairs = [(lit, other, name) for lit in LIT_ARMS for other, name in (("sb3", "SB3"), ("cleanrl", "CleanRL"))]
    for lit, other, name in pairs + [("lit_overlap", "lit_ppo", "lit_ppo")]:
        if lit in meds and other in meds:
            a, b = meds[lit], meds[other]
            print(f"{lit}/{name}: SPS {a['sps'] / b['sps']:.2f}x, steps to {target:g} "
                  f"{fmt(a['steps'] / b['steps'], '.2f')}x, train seconds to {target:g} "
                  f"{fmt(a['secs'] / b['secs'], '.2f')}x, peak RSS {a['rss'] / b['rss']:.2f}x; per rollout, {name}'s "
                  f"time over lit_ppo's: updates {b['learn'] / a['learn']:.2f}x, "
                  f"the rest {(b['iter'] - b['learn']) / (a['iter'] - a['learn']):.2f}x")
            paired = [f"{by_seed[(s, lit)] / by_seed[(s, other)]:.2f}x" for s in seeds
                      if (s, lit) in by_seed and (s, other) in by_seed]
            print(f"  SPS {lit}/{name} per seed: {' '.join(paired)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", nargs="+", choices=SETTINGS, default=list(SETTINGS))
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--zoo-steps", type=int, default=SETTINGS["zoo"]["total_timesteps"])
    parser.add_argument("--cleanrl-steps", type=int, default=SETTINGS["cleanrl"]["total_timesteps"])
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads in every arm; 0: torch's default")
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--json", help="also write every run's result to this file")
    parser.add_argument("--lit-args", default="", help="extra lit_ppo CLI arguments, appended (they win)")
    parser.add_argument("--quick", action="store_true", help="a seconds-long smoke run: one seed, 2 iterations")
    args = parser.parse_args()
    settings = {name: dict(SETTINGS[name]) for name in args.settings}
    budgets = {"zoo": args.zoo_steps, "cleanrl": args.cleanrl_steps}
    for name, hp in settings.items():
        hp["total_timesteps"] = budgets[name]
    if args.quick:
        args.seeds = args.seeds[:1]
        for hp in settings.values():
            hp["total_timesteps"] = 2 * hp["num_envs"] * hp["num_steps"]
    arms = [a for a in args.arms if a != "sb3" or installed("stable_baselines3")]
    if len(arms) < len(args.arms):
        print('compare: stable_baselines3 is not installed (pip install -c constraints/ci.txt -e ".[bench]"): '
              "no SB3 arm.")
    print(f"compare: CartPole-v1, torch threads per arm: {args.threads or 'torch default'}, arms {arms}, "
          f"seeds {args.seeds}")
    results = {name: [] for name in settings}
    with tempfile.TemporaryDirectory() as tmp:
        for rep, seed in enumerate(args.seeds):
            order = arms[rep % len(arms):] + arms[:rep % len(arms)]  # rotate: each arm early and late once
            for name, hp in settings.items():
                for arm in order:
                    r = run_arm(arm, hp, seed, args.threads, args.target, Path(tmp) / f"{name}-{arm}-{seed}",
                                args.lit_args.split())
                    results[name].append(r)
                    print(f"  {name} {arm} seed {seed}: {r['sps']:.0f} SPS, solved at {fmt(r['steps_to_target'], ',.0f')} "
                          f"steps, eval {r['eval_return']:.1f}, {r['peak_rss_mb']:.0f} MB, process {r['process_s']:.1f} s",
                          flush=True)
    for name, hp in settings.items():
        print_table(name, hp, results[name], args.target)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

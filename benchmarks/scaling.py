"""How lit_ppo scales with the number of environments, and whether its memory stays flat over a long run.

Sweep: for each ``--num-envs`` a short ``fit`` through the CLI (CartPole-v1, ``--num-steps`` steps per env,
``--update-epochs`` epochs of ``--num-minibatches`` minibatches, one torch thread), reading lit_ppo's per-iteration
phase timers (``time/*_ms``) back from the CSV logger. Per point: SPS over the iterations after the first
(warm-up), and each phase's share of the iteration time: env (stepping the environments), act (policy inference
while acting), learn (the updates), other (GAE, copies, bookkeeping, Lightning's loop). ``--vectorization`` runs
the sweep for each of ``sync`` (SyncVectorEnv), ``native`` (gymnasium's CartPoleVectorEnv, next-step autoreset)
and ``envpool``, side by side, and prints native/sync. With ``--bound`` the CleanRL-style loop of baselines.py runs
the same settings over the same vector env (sync or native) in its own process, as a plain-PyTorch reference (on
the native env it trains on the reset steps instead of masking them: less work than lit_ppo does).

Memory: one long run (``--memory-steps``, default 1M, ``--memory-envs`` envs, one update epoch of one minibatch,
the shipped config's TensorBoard logger and checkpoints) records current and peak RSS after every iteration
(``probes.RSSProbe``); growth from ``--memory-warmup`` steps to the end must stay within 5%.

    python benchmarks/scaling.py [--num-envs 1 4 16 64 256] [--vectorization sync native] [--iterations 20]
                                 [--bound] [--memory-steps 1000000]
"""

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from compare import SETTINGS
from harness import check, read_json_lines, read_lit_ppo_metrics, run_process, lit_ppo_cmd

PHASES = ("env_ms", "act_ms", "learn_ms", "gae_ms", "sync_ms", "transfer_ms")


def sweep_point(num_envs: int, vectorization: str, args, cwd: Path) -> dict:
    rollout = num_envs * args.num_steps
    overrides = ["--data.num_envs", num_envs, "--data.num_steps", args.num_steps, "--data.vectorization", vectorization,
                 "--data.update_epochs", args.update_epochs,
                 "--data.minibatch_size", max(rollout // args.num_minibatches, 1),
                 "--data.total_timesteps", rollout * args.iterations, "--trainer.limit_val_batches", 0,
                 *args.lit_args.split()]
    check(run_process(lit_ppo_cmd("cartpole.yaml", overrides), cwd), f"lit_ppo with {num_envs} envs")
    rows, _ = read_lit_ppo_metrics(cwd)
    timed = rows[1:] or rows  # the first iteration pays for warm-up
    total_ms = sum(r["time/iteration_ms"] for r in timed)
    result = {"num_envs": num_envs, "sps": rollout * len(timed) / (total_ms / 1e3)}
    for phase in PHASES:
        result[phase] = sum(r[f"time/{phase}"] for r in timed) / total_ms
    result["other"] = 1.0 - sum(result[p] for p in PHASES if p in ("env_ms", "act_ms", "learn_ms"))
    if args.bound and vectorization in ("sync", "native"):
        hp = dict(SETTINGS["zoo"], num_envs=num_envs, num_steps=args.num_steps, update_epochs=args.update_epochs,
                  num_minibatches=min(args.num_minibatches, rollout), total_timesteps=rollout * args.iterations,
                  vectorization=vectorization)
        out = cwd / "bound.json"
        cmd = [sys.executable, Path(__file__).with_name("baselines.py"), "--worker", "cleanrl", "--hp", json.dumps(hp),
               "--seed", 1, "--out", out]
        check(run_process(cmd, cwd / "bound"), f"CleanRL-style loop with {num_envs} envs")
        bound = json.loads(out.read_text())
        result["bound_sps"] = bound["steps"] / bound["train_s"]  # all iterations, warm-up included
    return result


def memory_run(args, cwd: Path) -> list[dict]:
    """A long run of the shipped config (its logger and checkpoints, relative to ``cwd``), many cheap envs."""
    probe = cwd / "rss.jsonl"
    rollout = args.memory_envs * args.num_steps
    cmd = [sys.executable, "-m", "lit_ppo", "fit", "--config", "cartpole.yaml",
           "--data.num_envs", args.memory_envs, "--data.num_steps", args.num_steps, "--data.update_epochs", 1,
           "--data.minibatch_size", rollout, "--data.total_timesteps", args.memory_steps,
           "--trainer.enable_progress_bar", "false", "--trainer.limit_val_batches", 0,
           "--trainer.callbacks+=probes.RSSProbe", "--trainer.callbacks.path", probe, *args.lit_args.split()]
    check(run_process(cmd, cwd), "memory run")
    return read_json_lines(probe)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 4, 16, 64, 256])
    parser.add_argument("--vectorization", nargs="+", default=["sync"], choices=["sync", "async", "native", "envpool"])
    parser.add_argument("--num-steps", type=int, default=32)
    parser.add_argument("--update-epochs", type=int, default=4)
    parser.add_argument("--num-minibatches", type=int, default=4)
    parser.add_argument("--iterations", type=int, default=20, help="iterations (rollouts) per sweep point")
    parser.add_argument("--bound", action="store_true", help="also run the CleanRL-style loop at each point")
    parser.add_argument("--memory-steps", type=int, default=1_000_000, help="0: no memory run")
    parser.add_argument("--memory-envs", type=int, default=64)
    parser.add_argument("--memory-warmup", type=int, default=100_000)
    parser.add_argument("--lit-args", default="", help="extra lit_ppo CLI arguments, appended (they win)")
    parser.add_argument("--quick", action="store_true", help="a seconds-long smoke run")
    args = parser.parse_args()
    if args.quick:
        args.num_envs, args.iterations = args.num_envs[:2], 3
        args.memory_steps, args.memory_warmup, args.memory_envs = 4 * 2048, 2048, 64
    print(f"scaling: CartPole-v1, {args.num_steps} steps per env, {args.update_epochs} epochs x "
          f"{args.num_minibatches} minibatches, {args.iterations} iterations per point, one torch thread; "
          "shares of the iteration time after the first iteration")
    head = f"{'vector env':>10} {'envs':>5} {'SPS':>9} {'env':>6} {'act':>6} {'learn':>6} {'other':>6}"
    print(head + (f" {'plain SPS':>10} {'lit/plain':>9}" if args.bound else ""))
    sps: dict[tuple[str, int], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.num_envs:
            for vec in args.vectorization:  # side by side at each size: machine drift hits both
                r = sweep_point(n, vec, args, Path(tmp) / f"{vec}{n}")
                sps[vec, n] = r["sps"]
                line = f"{vec:>10} {n:>5} {r['sps']:>9.0f} " + " ".join(
                    f"{r[k]:>6.1%}" for k in ("env_ms", "act_ms", "learn_ms", "other"))
                if "bound_sps" in r:
                    line += f" {r['bound_sps']:>10.0f} {r['sps'] / r['bound_sps']:>9.2f}"
                print(line, flush=True)
        for vec in args.vectorization:
            if vec != "sync" and ("sync", args.num_envs[0]) in sps:
                ratios = ", ".join(f"{n} envs {sps[vec, n] / sps['sync', n]:.2f}x" for n in args.num_envs)
                print(f"lit_ppo {vec}/sync SPS: {ratios}")
        if args.memory_steps:
            samples = memory_run(args, Path(tmp) / "memory")
            report_memory(samples, args)


def report_memory(samples: list[dict], args) -> None:
    warm = next(s for s in samples if s["env_steps"] >= args.memory_warmup)
    last = samples[-1]
    growth = last["rss_mb"] / warm["rss_mb"] - 1
    print(f"\nmemory: {args.memory_envs} envs x {args.num_steps} steps, 1 epoch, {last['env_steps']:,} steps in "
          f"{last['time'] - samples[0]['time']:.0f} s (TensorBoard logger and checkpoints as shipped)")
    print(f"{'env steps':>10} {'RSS MB':>8} {'peak MB':>8}")
    picks = {s["env_steps"] for s in (samples[0], warm, last)}
    picks |= {samples[int(len(samples) * f)]["env_steps"] for f in (0.25, 0.5, 0.75)}
    for s in samples:
        if s["env_steps"] in picks:
            print(f"{s['env_steps']:>10,} {s['rss_mb']:>8.1f} {s['peak_mb']:>8.1f}")
    verdict = "ok" if growth <= 0.05 else "FAIL"
    print(f"RSS growth {warm['env_steps']:,} -> {last['env_steps']:,} steps: {growth:+.1%} "
          f"(peak {warm['peak_mb']:.1f} -> {last['peak_mb']:.1f} MB; limit +5%): {verdict}")
    after = [s["rss_mb"] for s in samples if s["env_steps"] >= warm["env_steps"]]
    print(f"median RSS after warm-up: {statistics.median(after):.1f} MB")


if __name__ == "__main__":
    main()

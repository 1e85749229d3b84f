"""``python -m lit_ppo profile --config C [--iterations N] [overrides ...]``: where the time of an iteration goes,
for each placement this machine offers.

Each placement is a short ``fit`` in its own process (a clean device state, a fair wall time), logging with a
CSV logger; the table gives per-phase medians over the iterations after the first (warm-up), the process's
wall time, SPS over those iterations, and the ratio of SPS against all-CPU.
"""

import argparse
import csv
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

PHASES = ("env_ms", "act_ms", "gae_ms", "sync_ms", "transfer_ms", "learn_ms", "iteration_ms")
PLACEMENTS = {
    # name: (trainer accelerator, model.actor_device, what it means)
    "all-cpu": ("cpu", "cpu", "envs, acting and learning on the CPU"),
    "cpu-act/gpu-learn": ("gpu", "cpu", "envs and acting on the CPU, learning on the GPU"),
    "all-gpu-act": ("gpu", "learner", "envs on the CPU, acting and learning on the GPU"),
}


def run_placement(name: str, config: str, iterations: int, extra: list[str], workdir: Path) -> dict:
    accelerator, actor, _ = PLACEMENTS[name]
    save_dir = workdir / name.replace("/", "_")
    cmd = [sys.executable, "-m", "lit_ppo", "fit", "--config", config, *extra,
           "--trainer.accelerator", accelerator, "--trainer.devices", "1", "--model.actor_device", actor,
           "--trainer.max_epochs", str(iterations), "--trainer.logger", "lightning.pytorch.loggers.CSVLogger",
           "--trainer.logger.save_dir", str(save_dir), "--trainer.callbacks", "[]",
           "--trainer.enable_checkpointing", "false", "--trainer.enable_progress_bar", "false",
           "--trainer.limit_val_batches", "0"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"lit_ppo profile: the {name} run failed:\n{proc.stderr[-3000:]}")
    [metrics] = save_dir.glob("*/version_*/metrics.csv")
    rows = [r for r in csv.DictReader(metrics.open()) if r.get("time/iteration_ms")]
    timed = rows[1:] or rows  # the first iteration pays for warm-up (allocations, caches, lazy init)
    result = {phase: statistics.median(float(r[f"time/{phase}"]) for r in timed) for phase in PHASES}
    steps_per_iteration = float(rows[0]["time/env_steps"])
    result["sps"] = steps_per_iteration * len(timed) / (sum(float(r["time/iteration_ms"]) for r in timed) / 1e3)
    result["wall_s"] = wall
    result["iterations"] = len(rows)
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m lit_ppo profile", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    parser.add_argument("--iterations", type=int, default=10, help="iterations (rollouts) per placement")
    args, extra = parser.parse_known_args(argv)
    available = ["all-cpu"]
    if torch.cuda.is_available():
        available += ["cpu-act/gpu-learn", "all-gpu-act"]
    with tempfile.TemporaryDirectory() as tmp:
        results = {name: run_placement(name, args.config, args.iterations, extra, Path(tmp)) for name in available}
    base = results["all-cpu"]["sps"]
    header = f"{'placement':<18}" + "".join(f"{p:>13}" for p in PHASES) + f"{'wall s':>9}{'SPS':>10}{'vs CPU':>8}"
    print(f"lit_ppo profile: {args.config} {' '.join(extra)}; per-iteration medians in ms over "
          f"{args.iterations - 1} iterations after the first")
    print(header)
    for name, r in results.items():
        print(f"{name:<18}" + "".join(f"{r[p]:>13.2f}" for p in PHASES)
              + f"{r['wall_s']:>9.1f}{r['sps']:>10.0f}{r['sps'] / base:>7.2f}x")
    for name in PLACEMENTS:
        if name not in results:
            print(f"{name:<18} not run: {PLACEMENTS[name][2]} needs a CUDA device, and torch.cuda.is_available() is "
                  f"False here (torch {torch.__version__}).")
    return 0

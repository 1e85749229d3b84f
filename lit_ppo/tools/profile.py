"""``python -m lit_ppo profile``: where the time of an iteration goes, and which placement is fastest, on this
machine.

- ``profile --config C [--iterations N] [overrides ...]``: one config, each placement this machine offers, with
  per-phase medians. The placements: serial ones (all on the CPU; CPU acting with a GPU learner; GPU acting and
  learning) and ``data.overlap``'s (a collector process beside a CPU or GPU learner), whose rows add how long the
  learner waited for each rollout and the collector for the weights. ``--placements`` narrows them.
- ``profile [--rows mlp64 mlp256 mlp1024 cnn] [--compile off on] [--iterations N]``: the device-choice table. Each
  row (a CartPole MLP of that width, the Nature CNN on Breakout) for each placement and ``model.compile`` off and
  on; the 1024-unit MLP and the CNN also at ``bf16-mixed`` and ``16-mixed`` on a GPU. SPS and the ratio against the
  row's all-CPU eager run: measured figures only (what earlier designs expected is in docs/notebook/performance.md).

Each run is a short ``fit`` in its own process (a clean device state, a fair wall time), logging with a CSV
logger; figures are medians over the iterations after the first (warm-up and compilation).
"""

import argparse
import csv
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import torch

PHASES = ("env_ms", "act_ms", "gae_ms", "sync_ms", "transfer_ms", "learn_ms", "rollout_wait_ms", "weights_wait_ms",
          "iteration_ms")
PLACEMENTS = {
    # name: (trainer accelerator, model.actor_device, data.overlap, what it means)
    "all-cpu": ("cpu", "cpu", False, "envs, acting and learning on the CPU"),
    "overlap-cpu": ("cpu", "cpu", True, "envs and acting in a collector process beside a CPU learner (data.overlap)"),
    "cpu-act/gpu-learn": ("gpu", "cpu", False, "envs and acting on the CPU, learning on the GPU"),
    "overlap/gpu-learn": ("gpu", "cpu", True, "envs and acting in a collector process, learning on the GPU "
                                              "(data.overlap)"),
    "all-gpu-act": ("gpu", "learner", False, "envs on the CPU, acting and learning on the GPU"),
}
# The device-choice rows: (config, overrides).
ROWS = {
    "mlp64": ("cartpole.yaml", ["--model.hidden_sizes", "[64, 64]"]),
    "mlp256": ("cartpole.yaml", ["--model.hidden_sizes", "[256, 256]"]),
    "mlp1024": ("cartpole.yaml", ["--model.hidden_sizes", "[1024, 1024]"]),
    "cnn": ("breakout.yaml", ["--data.vectorization", "sync"]),
}
MIXED_ROWS = ("mlp1024", "cnn")  # rows also measured under mixed precision on a GPU
WARMUP = 2  # iterations of each table run left out of its figures
CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"


def run_fit(config: str, placement: str, iterations: int, extra: list[str], save_dir: Path, warmup: int = 1) -> dict:
    accelerator, actor, overlap, _ = PLACEMENTS[placement]
    cmd = [sys.executable, "-m", "lit_ppo", "fit", "--config", config, *extra,
           "--trainer.accelerator", accelerator, "--trainer.devices", "1", "--model.actor_device", actor,
           "--data.overlap", str(overlap).lower(),
           "--trainer.max_epochs", str(iterations), "--trainer.logger", "lightning.pytorch.loggers.CSVLogger",
           "--trainer.logger.save_dir", str(save_dir), "--trainer.callbacks", "[]",
           "--trainer.enable_checkpointing", "false", "--trainer.enable_progress_bar", "false",
           "--trainer.limit_val_batches", "0"]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        said = [line for line in proc.stderr.splitlines() if "error:" in line]  # the fit's own one-line error
        print(f"lit_ppo profile: error: the {placement} run of {config} {' '.join(extra)} failed: "
              f"{said[-1] if said else proc.stderr[-2000:]}", file=sys.stderr)
        raise SystemExit(2)
    [metrics] = save_dir.glob("*/version_*/metrics.csv")
    rows = [r for r in csv.DictReader(metrics.open()) if r.get("time/iteration_ms")]
    timed = rows[warmup:] or rows  # the first iterations pay for warm-up (allocations, caches, compilation)
    # the waits exist in overlapped runs only
    result = {phase: statistics.median(float(r.get(f"time/{phase}") or "nan") for r in timed) for phase in PHASES}
    steps_per_iteration = float(rows[0]["time/env_steps"])
    result["sps"] = steps_per_iteration / (result["iteration_ms"] / 1e3)
    result["wall_s"] = wall
    return result


def available_placements(wanted: Optional[list[str]] = None) -> list[str]:
    """The placements of ``wanted`` (default: all) this machine offers, in PLACEMENTS' order."""
    return [p for p, (accelerator, *_) in PLACEMENTS.items() if (wanted is None or p in wanted)
            and (accelerator == "cpu" or torch.cuda.is_available())]


def print_missing_placements(wanted: Optional[list[str]] = None) -> None:
    for name in wanted or PLACEMENTS:
        if name not in available_placements():
            print(f"{name:<18} not run: {PLACEMENTS[name][3]} needs a CUDA device, and torch.cuda.is_available() is "
                  f"False here (torch {torch.__version__}).")


def profile_config(config: str, iterations: int, extra: list[str], placements: Optional[list[str]] = None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        results = {name: run_fit(config, name, iterations, extra, Path(tmp) / name.replace("/", "_"))
                   for name in available_placements(placements)}
    base = next(iter(results.values()))["sps"]
    print(f"lit_ppo profile: {config} {' '.join(extra)}; per-iteration medians in ms over "
          f"{iterations - 1} iterations after the first")
    print(f"{'placement':<18}" + "".join(f"{p:>16}" for p in PHASES) + f"{'wall s':>9}{'SPS':>10}{'vs CPU':>8}")
    for name, r in results.items():
        print(f"{name:<18}" + "".join(f"{r[p]:>16.2f}" for p in PHASES)
              + f"{r['wall_s']:>9.1f}{r['sps']:>10.0f}{r['sps'] / base:>7.2f}x")
    print_missing_placements(placements)


def row_runs(row: str, compiles: list[str], placements: Optional[list[str]] = None) -> list[tuple[str, str, str]]:
    """(placement, compile, precision) of every run of a row on this machine."""
    runs = [(p, c, "32-true") for p in available_placements(placements) for c in compiles]
    if row in MIXED_ROWS and torch.cuda.is_available():
        runs += [(p, c, precision) for p in available_placements(placements) if PLACEMENTS[p][0] == "gpu"
                 for c in compiles for precision in ("bf16-mixed", "16-mixed")]
    return runs


def profile_table(rows: list[str], compiles: list[str], iterations: int, extra: list[str],
                  placements: Optional[list[str]] = None) -> None:
    print(f"lit_ppo profile: the device-choice table; SPS from the median iteration over {iterations - WARMUP} after "
          f"the first {WARMUP}; 'vs CPU' against the row's first run (all-cpu with compile off, where asked for)")
    print(f"{'row':<8}{'placement':<19}{'compile':<8}{'precision':<11}{'SPS':>9}{'vs CPU':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for row in rows:
            config, overrides = ROWS[row]
            if row == "cnn" and importlib.util.find_spec("ale_py") is None:
                print(f"{row:<8} not run: needs ale-py for Breakout (pip install 'lit_ppo[atari]')")
                continue
            base = None
            for placement, compile, precision in row_runs(row, compiles, placements):
                args = [*overrides, "--model.compile", "true" if compile == "on" else "false",
                        "--trainer.precision", precision, *extra]
                save_dir = Path(tmp) / f"{row}-{placement.replace('/', '_')}-{compile}-{precision}"
                # compiled runs compile at the first iteration and may recompile once at the second
                sps = run_fit(config, placement, iterations, args, save_dir, warmup=WARMUP)["sps"]
                base = sps if base is None else base  # the first run: the first placement, compile as listed first
                print(f"{row:<8}{placement:<19}{compile:<8}{precision:<11}{sps:>9.0f}{sps / base:>7.2f}x", flush=True)
    print_missing_placements(placements)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m lit_ppo profile", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="profile this config's phases (otherwise: the device-choice table)")
    parser.add_argument("--iterations", type=int, default=10, help="iterations (rollouts) per run")
    parser.add_argument("--rows", nargs="+", choices=list(ROWS), default=list(ROWS))
    parser.add_argument("--compile", nargs="+", choices=("off", "on"), default=["off", "on"])
    parser.add_argument("--placements", nargs="+", choices=list(PLACEMENTS), help="only these (default: every one "
                        "this machine offers; overlap-* are data.overlap's)")
    args, extra = parser.parse_known_args(argv)
    if args.iterations < (2 if args.config else WARMUP + 1):
        parser.error(f"--iterations must be at least {2 if args.config else WARMUP + 1} (the first are warm-up)")
    if args.config:
        from lit_ppo.cli import shipped_config

        if not Path(shipped_config(args.config)).is_file():
            print(f"lit_ppo profile: error: --config {args.config}: no such file, and no shipped config of that name "
                  f"({', '.join(sorted(p.name for p in CONFIG_DIR.glob('*.yaml')))}).", file=sys.stderr)
            return 2
        profile_config(args.config, args.iterations, extra, args.placements)
    else:
        profile_table(args.rows, sorted(args.compile, key=("off", "on").index), args.iterations, extra,
                      args.placements)
    return 0

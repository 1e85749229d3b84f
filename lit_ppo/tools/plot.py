"""``python -m lit_ppo plot RUN_DIR [RUN_DIR ...] [--out FILE]``: learning curves from logged metrics.

A run is a directory holding a CSVLogger ``metrics.csv`` or TensorBoard event files (``events.out.tfevents.*``);
each RUN_DIR is searched recursively, so ``runs/cartpole`` finds every ``version_*`` run under it. Each RUN_DIR
is one curve: the mean over the runs found under it (e.g. seeds) with a +-1 standard deviation band, and the
single runs as thin lines. The x axis is the logged step, which for everything lit_ppo logs (rollout metrics,
evaluations, videos) is the environment steps of all processes so far (``time/env_steps``).
"""

import argparse
import csv
import math
import sys
from pathlib import Path
from typing import Optional

import numpy as np

from lit_ppo.errors import ConfigError
from lit_ppo.tools.outputs import check_output

DEFAULT_METRICS = ("rollout/return_mean", "eval/return_mean")
EVENT_GLOB = "events.out.tfevents.*"

Curve = tuple[np.ndarray, np.ndarray]  # (env steps, values), sorted by env steps


class PlotError(Exception):
    """A problem with the user's input, reported as one line without a traceback."""


def find_runs(root: Path) -> list[Path]:
    """Directories under ``root`` (itself included) that hold metrics: ``metrics.csv`` or TensorBoard events."""
    if not root.is_dir():
        raise PlotError(f"{root}: not a directory")
    found = {p.parent for p in root.rglob("metrics.csv")} | {p.parent for p in root.rglob(EVENT_GLOB)}
    return sorted(found)


def read_run(run_dir: Path) -> dict[str, dict[int, float]]:
    """Every scalar of one run as ``{name: {step: value}}``; ``metrics.csv`` wins over event files."""
    csv_file = run_dir / "metrics.csv"
    return _read_csv(csv_file) if csv_file.exists() else _read_tensorboard(run_dir)


def _read_csv(path: Path) -> dict[str, dict[int, float]]:
    scalars: dict[str, dict[int, float]] = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            step = int(float(row["step"]))
            for name, text in row.items():
                if name != "step" and text not in ("", None):
                    scalars.setdefault(name, {})[step] = float(text)
    return scalars


def _read_tensorboard(run_dir: Path) -> dict[str, dict[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={SCALARS: 0})  # 0: keep every point
    events.Reload()
    return {tag: {e.step: e.value for e in events.Scalars(tag)} for tag in events.Tags()[SCALARS]}


def curve(scalars: dict[str, dict[int, float]], metric: str) -> Optional[Curve]:
    """``metric`` against its logged step (environment steps), or None if the run did not log a finite value."""
    points = sorted((step, value) for step, value in scalars.get(metric, {}).items() if math.isfinite(value))
    if not points:
        return None
    x, y = np.array(points, dtype=float).T
    return x, y


def mean_and_std(curves: list[Curve]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and standard deviation across runs on the env steps of the shortest run (linear interpolation)."""
    end = min(x[-1] for x, _ in curves)
    grid = np.unique(np.concatenate([x[x <= end] for x, _ in curves]))
    stacked = np.stack([np.interp(grid, x, y) for x, y in curves])
    return grid, stacked.mean(0), stacked.std(0)


def plot(groups: dict[str, list[Path]], metrics: list[str], out: Path, title: Optional[str] = None) -> list[str]:
    """Writes the figure to ``out``; returns the metrics it drew (those logged by at least one run)."""
    from matplotlib.figure import Figure  # no pyplot: no GUI backend, nothing global

    data = {label: [read_run(run) for run in runs] for label, runs in groups.items()}
    drawn = [m for m in metrics if any(curve(s, m) is not None for runs in data.values() for s in runs)]
    if not drawn:
        raise PlotError(f"none of the runs logged {' or '.join(metrics)}")
    fig = Figure(figsize=(7, 3.6 * len(drawn)), layout="constrained")
    axes = fig.subplots(len(drawn), 1, squeeze=False, sharex=True)[:, 0]
    for ax, metric in zip(axes, drawn):
        for index, (label, runs) in enumerate(data.items()):
            color = f"C{index}"
            curves = [c for c in (curve(s, metric) for s in runs) if c is not None]
            if not curves:
                continue
            for x, y in curves:
                ax.plot(x, y, color=color, alpha=0.3, linewidth=0.8)
            x, mean, std = mean_and_std(curves)
            marker = "o" if len(x) <= 30 else None  # sparse (evaluation) points stay visible as points
            ax.plot(x, mean, color=color, linewidth=2, marker=marker, markersize=4,
                    label=f"{label} (mean of {len(curves)})")
            if len(curves) > 1:
                ax.fill_between(x, mean - std, mean + std, color=color, alpha=0.2, linewidth=0)
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize="small")
    axes[-1].set_xlabel("environment steps")
    axes[0].set_title(title or "mean ± 1 std over runs")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    return drawn


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m lit_ppo plot", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR")
    parser.add_argument("--out", type=Path, default=Path("learning_curve.png"), help="PNG to write")
    parser.add_argument("--metric", action="append", dest="metrics",
                        help=f"metric to plot (repeatable; default: {', '.join(DEFAULT_METRICS)}, where logged)")
    parser.add_argument("--title", help="figure title")
    args = parser.parse_args(argv)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("lit_ppo plot: error: needs matplotlib: pip install 'lit_ppo[plot]'", file=sys.stderr)
        return 2
    try:
        check_output(args.out, "--out")  # never over a checkpoint, and said before the runs are read
        groups = {}
        for run_dir in args.run_dirs:
            runs = find_runs(run_dir)
            if not runs:
                raise PlotError(f"{run_dir}: no metrics.csv or TensorBoard event file ({EVENT_GLOB}) under it")
            groups[str(run_dir)] = runs
        drawn = plot(groups, args.metrics or list(DEFAULT_METRICS), args.out, args.title)
    except (PlotError, ConfigError) as err:
        print(f"lit_ppo plot: error: {err}", file=sys.stderr)
        return 2
    runs = sum(len(r) for r in groups.values())
    print(f"wrote {args.out} ({', '.join(drawn)} over {runs} run{'s' * (runs != 1)})")
    return 0

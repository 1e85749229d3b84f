"""``docs/results.md`` and its figures from the ``result.json`` files ``benchmarks/learning.py`` wrote.

Everything in the tables is read from those files; the published score of each env is read from its config's
header line ``# Published (<source>): <mean> +- <std> at <budget> steps``, which cites where it comes from.
Notes written by hand below the ``<!-- notes -->`` line of an existing report are kept as they are.

    python benchmarks/learning_report.py [--out benchmarks/results/learning] [--report docs/results.md]
"""

import argparse
import csv
import hashlib
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Optional

from harness import REPO

CONFIG_DIR = REPO / "lit_ppo" / "configs"
NOTES_MARKER = "<!-- notes -->"
PUBLISHED = re.compile(r"^# Published \(([^)]*)\): (-?[\d.]+) \+- ([\d.]+) at (\S+) steps(.*)$", re.MULTILINE)



def read_config(config: Path) -> dict:
    import yaml  # jsonargparse's dependency: always there with lit_ppo

    return yaml.safe_load(config.read_text())


def settings_sha(settings: dict) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]


def config_sha(config: Path) -> str:
    """The config's settings (not its comments) as a short hash: a result of other settings is not this config's."""
    return settings_sha(read_config(config))


# Keys written into every shipped config by the commit that changed their default, so that the configs kept their
# settings: a run made before that commit left the key out and trained with the value now spelled out.
# (section, key, value spelled out, commit, its day)
SPELLED_OUT = [("model", "target_kl", None, "d2d0696", "2026-12-06"),  # the default KL stop at 0.02
               ("data", "stagger_episodes", False, "2a993ef", "2026-12-07"),  # first episodes staggered by default
               ("model", "log_std_init", 0.0, "02abd19", "2026-12-08")]  # the Gaussian's first std 0.61 by default


def trained_before(recorded: dict, commit: str, day: str) -> bool:
    """Whether the run of a ``result.json`` or ``fit.json`` was trained before ``commit``: by every commit that trained
    it being an ancestor of ``commit``'s parent, or, where git does not know one of them (a clone without that
    history), by its date being before ``day``."""
    import subprocess

    trained_by = recorded.get("commits") or [a.get("commit") for a in recorded.get("attempts", [])]
    trained_by = [c.removesuffix("+dirty") for c in trained_by if c and c != "?"]
    def git(*args: str) -> int:
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True).returncode

    if trained_by and all(git("cat-file", "-e", f"{c}^{{commit}}") == 0 for c in [*trained_by, commit]):
        return all(git("merge-base", "--is-ancestor", c, f"{commit}^") == 0 for c in trained_by)
    return "date" in recorded and recorded["date"] < day


def same_settings(recorded: dict, config: Path) -> bool:
    """Whether a run's ``result.json`` or ``fit.json`` is of ``config``'s settings: its hash is the config's, or the
    config's without the keys of :data:`SPELLED_OUT` spelled out since the run."""
    if recorded.get("config_sha") == config_sha(config):
        return True
    settings = read_config(config)
    for section, key, value, commit, day in SPELLED_OUT:
        part = settings.get(section) or {}
        if key in part and part[key] == value and trained_before(recorded, commit, day):
            settings = {**settings, section: {k: v for k, v in part.items() if k != key}}
            if recorded.get("config_sha") == settings_sha(settings):
                return True
    return False

def published(config_name: str) -> Optional[dict]:
    """The published score cited in the config's header, or None where it cites none."""
    path = CONFIG_DIR / config_name
    match = PUBLISHED.search(path.read_text()) if path.is_file() else None
    if not match:
        return None
    source, mean, std, budget, rest = match.groups()
    # the line may go on with where it was measured, e.g. ", measured on LunarLander-v2 (...)"
    on = re.search(r"measured[\s#]+on[\s#]+([\w-]+)", rest + " " + path.read_text()[match.end():match.end() + 200])
    return {"source": source, "mean": float(mean), "std": float(std), "budget": budget,
            "measured_on": on.group(1) if on else None}


def load_results(out: Path) -> list[dict]:
    """The results of each config's current settings (runs of earlier settings are set aside as ``stale-*``)."""
    results = [json.loads(p.read_text()) | {"_dir": p.parent} for p in sorted(out.glob("*/steps*/seed*/result.json"))]
    return [r for r in results if not (CONFIG_DIR / r["config"]).is_file() or same_settings(r, CONFIG_DIR / r["config"])]


def max_of_seed_mean(runs: list[dict]) -> Optional[tuple[float, int]]:
    """Tianshou's measure: the maximum over training of the seeds' mean in-fit evaluation (``eval/return_mean`` in
    each run's ``curves/metrics.csv``), over the steps every seed evaluated at; ``(value, step)``, or None."""
    curves = []
    for r in runs:
        path = r["_dir"] / "curves" / "metrics.csv"
        if not path.is_file():
            return None
        with path.open() as f:
            curves.append({int(float(row["step"])): float(row["eval/return_mean"])
                           for row in csv.DictReader(f) if row.get("eval/return_mean")})
    common = set.intersection(*(set(c) for c in curves)) if curves else set()
    if not common:
        return None
    return max((statistics.fmean(c[s] for c in curves), s) for s in common)


def decimals(value: float) -> int:
    """One decimal; three below 10 (a per-agent return such as VMAS's ~1.04, which one would show as 1.0 ± 0.0)."""
    return 1 if abs(value) >= 10 else 3


def mean_std(values: list[float]) -> str:
    """``mean ± std`` over seeds (:func:`decimals` of the mean)."""
    digits = decimals(statistics.fmean(values))
    if len(values) == 1:
        return f"{values[0]:.{digits}f} (1 seed)"
    return f"{statistics.fmean(values):.{digits}f} ± {statistics.pstdev(values):.{digits}f}"


def steps(budget: str) -> int:
    """A published budget as written in a config header (``100k``, ``1M``, ``1,000,000``) in env steps."""
    scale = {"k": 1_000, "M": 1_000_000}.get(budget[-1:], 1)
    return int(float(budget.rstrip("kM").replace(",", "")) * scale)


def verdict(mean: float, ref: Optional[dict], budget: int) -> str:
    """Issue 16's targets: at or above the published mean, or at least within one of its standard deviations;
    compared only where the run had the published budget."""
    if ref is None:
        return "no published score"
    published_steps = steps(ref["budget"])
    if budget != published_steps:
        return f"n/a: {'smaller' if budget < published_steps else 'larger'} budget"
    if mean >= ref["mean"]:
        return "≥ published mean"
    return "≥ mean − 1 std" if mean >= ref["mean"] - ref["std"] else "**below mean − 1 std**"


def plot_env(config: str, runs_by_budget: dict[int, list[dict]], figure: Path) -> bool:
    """Training and evaluation returns of every seed, one colour per budget; False where matplotlib is missing."""
    if str(REPO) not in sys.path:  # this checkout's lit_ppo, as the fits use (harness.child_env)
        sys.path.insert(0, str(REPO))
    try:
        from lit_ppo.tools.plot import plot
    except ImportError:
        return False
    groups = {f"{budget:,} steps": [r["_dir"] / "curves" for r in runs]
              for budget, runs in sorted(runs_by_budget.items())}
    try:
        plot(groups, ["rollout/return_mean", "eval/return_mean"], figure, title=f"{config}: mean ± 1 std over seeds")
    except ImportError:  # matplotlib (the plot extra) is imported when drawing
        return False
    return True


def summary(by_config: dict[str, dict[int, list[dict]]]) -> list[str]:
    """One row per config and budget (every shipped config, run or not), and issue 16's two counts over the rows
    with a published score at the same budget: at or above its mean, and at or above its mean minus one std."""
    lines = ["## Summary", "", "| config | env | budget | seeds | final policy | published | vs published |",
             "|---|---|---|---|---|---|---|"]
    verdicts = []
    for config in sorted(set(by_config) | {p.name for p in CONFIG_DIR.glob("*.yaml")}):
        ref = published(config)
        ref_text = "—" if ref is None else f"{ref['mean']:.1f} at {ref['budget']}"
        if config not in by_config:
            settings = read_config(CONFIG_DIR / config)["data"]
            lines.append(f"| `{config}` | {settings['env_id']} | {settings['total_timesteps']:,} | 0 | not run here "
                         f"(see the notes) | {ref_text} | |")
            continue
        for budget, runs in sorted(by_config[config].items()):
            finals = [r["final"]["return_mean"] for r in runs]
            result = verdict(statistics.fmean(finals), ref, budget)
            if ref is not None and budget == steps(ref["budget"]):  # a judged row
                verdicts.append(result)
            lines.append(f"| `{config}` | {runs[0]['env_id']} | {budget:,} | {len(runs)} | {mean_std(finals)} | "
                         f"{ref_text} | {result} |")
    above = sum(v == "≥ published mean" for v in verdicts)
    within = sum(v != "**below mean − 1 std**" for v in verdicts)
    lines += ["", f"Of the {len(verdicts)} rows with a published score at the same budget, **{above}** are at or "
              f"above the published mean and **{within}** at or above the mean minus one std.", ""]
    return lines


def table(config: str, runs_by_budget: dict[int, list[dict]], figure_link: Optional[str]) -> list[str]:
    ref = published(config)
    any_run = next(iter(runs_by_budget.values()))[0]
    lines = [f"## {any_run['env_id']} (`configs/{config}`)", ""]
    lines += ["| budget (env steps) | seeds | final policy, mean ± std over seeds | best.ckpt, mean ± std over seeds "
              "| max over training of the seeds' mean evaluation | published | vs published (final) "
              "| fit wall time per run |", "|---|---|---|---|---|---|---|---|"]
    ref_text = "—" if ref is None else (f"{ref['mean']:.1f} ± {ref['std']:.1f} at {ref['budget']} ({ref['source']}"
                                        + (f"; {ref['measured_on']}" if ref["measured_on"] else "") + ")")
    for budget, runs in sorted(runs_by_budget.items()):
        finals = [r["final"]["return_mean"] for r in runs]
        bests = [r["best"]["return_mean"] for r in runs if r.get("best")]
        budget_text = f"{budget:,}" + (f" (published {runs[0]['published_timesteps']:,})"
                                       if runs[0]["budget_overridden"] else "")
        walls = [r["fit_wall_s"] / 60 for r in runs]
        peak = max_of_seed_mean(runs)
        peak_text = "—" if peak is None else f"{peak[0]:.{decimals(peak[0])}f} (at {peak[1]:,})"
        lines.append(f"| {budget_text} | {', '.join(str(r['seed']) for r in runs)} | {mean_std(finals)} | "
                     f"{mean_std(bests) if bests else '—'} | {peak_text} | {ref_text} | "
                     f"{verdict(statistics.fmean(finals), ref, budget)} | "
                     f"{statistics.fmean(walls):.1f} min |")
    lines.append("")
    for budget, runs in sorted(runs_by_budget.items()):
        for r in runs:
            f, b = r["final"], r.get("best")
            best_text = (f"; best.ckpt (from {b['env_steps']:,} steps) {b['return_mean']:.1f} ± {b['return_std']:.1f}"
                         if b else "; no best.ckpt (no evaluation during the fit)")
            killed = (f" ({r['fit_attempts_killed']} killed outright, timed to its last checkpoint)"
                      if r.get("fit_attempts_killed") else "")
            extra = f"; fit args `{' '.join(r['fit_args'])}`" if r.get("fit_args") else ""
            lines.append(f"- {budget:,} steps, seed {r['seed']}: final ({f['env_steps']:,} steps) "
                         f"{f['return_mean']:.1f} ± {f['return_std']:.1f} over {f['episodes']} episodes{best_text}; "
                         f"fit {r['fit_wall_s'] / 60:.1f} min in {r['fit_attempts']} process(es){killed}{extra}")
    if figure_link:
        lines += ["", f"![{config} learning curves]({figure_link})"]
    return lines + [""]


def write_report(out: Path, report: Path) -> Path:
    results = load_results(out)
    by_config: dict[str, dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in results:
        by_config[r["config"]][r["total_timesteps"]].append(r)
    notes = ""
    if report.exists() and NOTES_MARKER in report.read_text():
        notes = report.read_text().split(NOTES_MARKER, 1)[1]
    cpus = sorted({f"{r['cpu']} ({r['cpus']} CPUs)" for r in results})
    lines = [
        "# Learning results",
        "",
        "Generated by `python benchmarks/learning.py` (`python benchmarks/learning_report.py` rebuilds it) from the",
        f"`result.json` of each run under `{_shown(out)}`; do not edit the tables by hand. Each run is one",
        "`python -m lit_ppo fit --config C --seed_everything S` in its own directory, then `validate` of its",
        "`last.ckpt` (the final policy) and of its `best.ckpt` (kept by the in-fit deterministic evaluation) on",
        "deterministic episodes seeded apart from training's (20 unless a line below says otherwise). \"mean ± std",
        "over seeds\" is over the seeds' evaluation means; a published score is one run, ± the std over its",
        "evaluation episodes. Wall time is the fit processes' (start-up and in-fit evaluations included), one",
        "process at a time, `torch_threads: 1`, nice'd, on " + (", ".join(cpus) or "—") + ".",
        "",
    ]
    if not results:
        lines += ["No finished runs yet.", ""]
    else:
        lines += summary(by_config)
    figures = report.parent / "results"
    for config, runs_by_budget in sorted(by_config.items()):
        figure = figures / f"{Path(config).stem}.png"
        link = f"{figures.name}/{figure.name}" if plot_env(config, runs_by_budget, figure) else None
        lines += table(config, runs_by_budget, link)
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text("\n".join(lines) + "\n" + NOTES_MARKER + (notes or "\n"))
    return report


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "learning")
    parser.add_argument("--report", type=Path, default=REPO / "docs" / "results.md")
    args = parser.parse_args()
    print(write_report(args.out, args.report))


if __name__ == "__main__":
    main()

"""Speed on the same work (issue 43): seconds to the budget and seconds to reach SB3's final score, for shipped
MuJoCo configs, synchronous and overlapped, beside SB3 trained by RL-Zoo's own ``train.py`` with RL-Zoo's
hyperparameters for the env.

Every arm trains from a fresh process without in-fit evaluation and saves a checkpoint every ``--every`` env steps
(lit_ppo: Lightning's ``ModelCheckpoint`` every so many rollouts; SB3: its ``CheckpointCallback`` with the
VecNormalize statistics, given to RL-Zoo as a ``callback`` hyperparameter). A checkpoint file's modification time
minus the process's launch is the clock at that step, start-up included, evaluation excluded, the same way for
every arm. After training, each checkpoint is scored on 20 deterministic episodes of fresh environments (seeded apart
from training's), lit_ppo's by ``validate``, SB3's as ``rl_zoo_anchor.py`` scores its final model.

Per env: SB3's final score is the median over its seeds of its last checkpoint's score; each arm's seconds to it are
those of its first checkpoint at or above it (a seed that never gets there counts as never). Printed and written to
``--report``: medians over the seeds of the seconds to the budget, the final score and the seconds to SB3's final
score, with lit_ppo's seconds over SB3's. Runs are recorded in ``OUT/results.jsonl`` as they finish; a finished
(config, arm, seed) is skipped, so an interrupted study goes on where it stopped. Arms run one at a time: a speed
figure is only worth its machine, so run nothing beside it.

    pip install -c constraints/ci.txt -e ".[bench,mujoco]"; python -m venv --system-site-packages zoo
    zoo/bin/pip install -c constraints/ci.txt rl-zoo3   # not a lit_ppo extra: it pins its own stack
    python benchmarks/mujoco_speed.py --configs halfcheetah.yaml ant.yaml --seeds 1 2 3 --zoo-python zoo/bin/python

Arms (``--arms``): ``sync`` (the config as shipped), ``overlap`` (``--data.overlap true``), ``overlap_decoupled``
(``--data.overlap true --model.decoupled true``), ``sb3_zoo`` (RL-Zoo's entry for the env: its v4 entry for a v5 env,
as the shipped configs translate it; ``--entry`` to name another).
"""

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from harness import check, median, read_json_lines, run_process
from learning import CONFIG_DIR, QUIET, commit, cpu_model, evaluate
from learning_report import read_config
from rl_zoo_anchor import EVAL_EPISODES, evaluate as evaluate_sb3

LIT_ARMS = {"sync": [], "overlap": ["--data.overlap", "true"],
            "overlap_decoupled": ["--data.overlap", "true", "--model.decoupled", "true"]}
ARMS = (*LIT_ARMS, "sb3_zoo")
FIT_TIMEOUT_S = 6 * 3600  # SB3 with RL-Zoo's HalfCheetah entry: ~28 min a million steps on a 2-core Xeon


def rollout_size(config: Path) -> int:
    """Env steps a rollout of ``config`` takes, with PPODataModule's own defaults where the config leaves them."""
    import inspect

    from lit_ppo import PPODataModule

    defaults = inspect.signature(PPODataModule).parameters
    data = read_config(config).get("data", {})
    return int(data.get("num_envs", defaults["num_envs"].default)) * int(
        data.get("num_steps", defaults["num_steps"].default))


def lit_arm(config: Path, arm: str, seed: int, steps: int, every: int, work: Path) -> tuple[list[dict], float]:
    """Train one lit_ppo arm, then score each of its checkpoints: ``([{env_steps, seconds, return_mean}, ...], the
    process's wall seconds)``."""
    per_rollout = rollout_size(config)
    every_rollouts = max(1, round(every / per_rollout))
    checkpoints = work / "checkpoints"
    saver = {"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
             "init_args": {"dirpath": str(checkpoints), "filename": "rollout{epoch}", "auto_insert_metric_name": False,
                           "every_n_epochs": every_rollouts, "save_top_k": -1, "save_on_train_epoch_end": True,
                           # given, not left to merge with the init_args of the config's own first callback;
                           # last.ckpt: the policy at the budget, which a rollout count need not be a multiple of
                           "monitor": None, "save_last": True}}
    cmd = [sys.executable, "-m", "lit_ppo", "fit", "--config", str(config), "--seed_everything", seed,
           "--data.total_timesteps", steps, *LIT_ARMS[arm], "--trainer.limit_val_batches", 0,
           "--trainer.logger", "false", "--trainer.callbacks", json.dumps([saver]), *QUIET]
    run = check(run_process(cmd, work, timeout=FIT_TIMEOUT_S), f"{config.name} {arm} seed {seed}")
    saved = {f"rollout{e}": p for e, p in sorted((int(p.stem.removeprefix("rollout")), p)
                                                 for p in checkpoints.glob("rollout*.ckpt"))}
    saved["last"] = checkpoints / "last.ckpt"  # written at the end of training (SaveLastOnStop)
    scores = evaluate(config, saved, work, EVAL_EPISODES, {}, LIT_ARMS[arm])
    curve = []
    for label, path in saved.items():  # in training order; last.ckpt only where it is later than every rollout's
        if not curve or scores[label]["env_steps"] > curve[-1]["env_steps"]:
            curve.append({"env_steps": scores[label]["env_steps"], "seconds": path.stat().st_mtime - run.launched_at,
                          "return_mean": scores[label]["return_mean"]})
    return curve, run.wall_s


ZOO_PPO_YML = ("import pathlib, sys, rl_zoo3; "
               "sys.stdout.write((pathlib.Path(rl_zoo3.__file__).parent / 'hyperparams' / 'ppo.yml').read_text())")


def zoo_entry(zoo_python: str, name: str) -> dict:
    """RL-Zoo's PPO entry ``name``, read from the rl_zoo3 installed where it will train."""
    import yaml

    text = subprocess.run([zoo_python, "-c", ZOO_PPO_YML], capture_output=True, text=True, check=True).stdout
    entries = yaml.safe_load(text)
    if name not in entries:
        raise SystemExit(f"RL-Zoo has no PPO entry {name!r}; give --entry one of its entries, e.g. HalfCheetah-v4.")
    return dict(entries[name])


def zoo_train_command(zoo_python: str, env_id: str, env_kwargs: dict, seed: int, steps: int, work: Path) -> list:
    """RL-Zoo's ``train.py`` on ``work/hyperparams.yml``, on the env the config trains: its ``data.env_kwargs`` too
    (``ant.yaml`` leaves Ant-v5's contact forces out, so SB3 must as well, or the two arms play different tasks)."""
    cmd = [zoo_python, "-m", "rl_zoo3.train", "--algo", "ppo", "--env", env_id, "--conf-file", work / "hyperparams.yml",
           "--seed", seed, "-n", steps, "--eval-freq", -1, "--log-folder", work / "logs", "--device", "cpu",
           "--num-threads", 1, "--verbose", 0]
    if env_kwargs:  # RL-Zoo evaluates each ``key:value`` as Python
        cmd += ["--env-kwargs", *(f"{key}:{value!r}" for key, value in env_kwargs.items())]
    return cmd


def sb3_arm(env_id: str, env_kwargs: dict, entry_name: str, zoo_python: str, seed: int, steps: int, every: int,
            work: Path) -> tuple[list[dict], float]:
    """Train SB3 by RL-Zoo's train.py with its entry, a checkpoint every ``every`` steps; score each checkpoint."""
    import yaml

    entry = zoo_entry(zoo_python, entry_name)
    saves = work / "checkpoints"
    entry["callback"] = [{"stable_baselines3.common.callbacks.CheckpointCallback": {
        "save_freq": max(1, every // int(entry.get("n_envs", 1))), "save_path": str(saves), "name_prefix": "ckpt",
        "save_vecnormalize": True}}]
    work.mkdir(parents=True, exist_ok=True)
    (work / "hyperparams.yml").write_text(yaml.safe_dump({env_id: entry}))
    cmd = zoo_train_command(zoo_python, env_id, env_kwargs, seed, steps, work)
    run = check(run_process(cmd, work, timeout=FIT_TIMEOUT_S), f"sb3 {entry_name} seed {seed}")
    curve = []
    for model in sorted(saves.glob("ckpt_*_steps.zip"), key=lambda p: int(p.stem.split("_")[1])):
        done = int(model.stem.split("_")[1])
        score = evaluate_sb3(model, saves / f"ckpt_vecnormalize_{done}_steps.pkl", env_id, seed, env_kwargs)
        curve.append({"env_steps": done, "seconds": model.stat().st_mtime - run.launched_at,
                      "return_mean": score["return_mean"]})
    return curve, run.wall_s


def seconds_to(curve: list[dict], target: float) -> float:
    """The clock at the first checkpoint scoring at least ``target``; ``inf`` where none does."""
    return next((point["seconds"] for point in curve if point["return_mean"] >= target), math.inf)


def summarize(rows: list[dict]) -> list[dict]:
    """Per config and arm: medians over seeds of the seconds to the budget, the final score and the seconds to SB3's
    final score (the median of its seeds' last checkpoints), and those seconds over SB3's."""
    table = []
    for config in dict.fromkeys(r["config"] for r in rows):
        mine = [r for r in rows if r["config"] == config]
        sb3 = [r for r in mine if r["arm"] == "sb3_zoo"]
        target = median([r["curve"][-1]["return_mean"] for r in sb3]) if sb3 else None
        sb3_seconds = median([seconds_to(r["curve"], target) for r in sb3]) if sb3 else None
        for arm in dict.fromkeys(r["arm"] for r in mine):
            runs = [r for r in mine if r["arm"] == arm]
            row = {"config": config, "arm": arm, "seeds": len(runs), "wall_s": median([r["wall_s"] for r in runs]),
                   "final": median([r["curve"][-1]["return_mean"] for r in runs]), "target": target,
                   "to_target_s": None, "reached": None, "vs_sb3": None}
            if target is not None:
                times = [seconds_to(r["curve"], target) for r in runs]
                row.update(to_target_s=median(times), reached=sum(t < math.inf for t in times))
                if sb3_seconds < math.inf:
                    row["vs_sb3"] = row["to_target_s"] / sb3_seconds
            table.append(row)
    return table


def markdown(table: list[dict], header: str) -> str:
    def seconds(s):
        return "never" if s == math.inf else "n/a" if s is None else f"{s:,.0f}"

    lines = [header, "", "| config | arm | seeds | seconds to the budget | final score | seconds to SB3's final score "
             "(seeds reaching it) | / SB3's |", "|---|---|---|---|---|---|---|"]
    for row in table:
        target = "n/a (no SB3 run)" if row["target"] is None else \
            f"{seconds(row['to_target_s'])} ({row['reached']} of {row['seeds']}; target {row['target']:,.1f})"
        ratio = "n/a" if row["vs_sb3"] is None or row["vs_sb3"] == math.inf else f"{row['vs_sb3']:.2f}"
        lines.append(f"| `{row['config']}` | {row['arm']} | {row['seeds']} | {seconds(row['wall_s'])} | "
                     f"{row['final']:,.1f} | {target} | {ratio} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", nargs="+", default=["halfcheetah.yaml", "ant.yaml"])
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--steps", type=int, help="budget instead of each config's data.total_timesteps")
    parser.add_argument("--every", type=int, default=51_200, help="env steps between checkpoints")
    parser.add_argument("--entry", help="RL-Zoo's PPO entry (default: the config's env id, v5 read as v4)")
    parser.add_argument("--zoo-python", default=sys.executable, help="a Python where rl_zoo3 is installed")
    parser.add_argument("--out", type=Path, default=Path("bench_runs/mujoco_speed"))
    parser.add_argument("--report", type=Path, help="also write the table here (markdown)")
    args = parser.parse_args(argv)

    results = args.out / "results.jsonl"
    done = {(r["config"], r["arm"], r["seed"]) for r in read_json_lines(results)}
    for name in args.configs:
        config = Path(name) if Path(name).is_file() else CONFIG_DIR / name
        settings = read_config(config)
        env_id = settings["data"]["env_id"]
        steps = args.steps or int(settings["data"]["total_timesteps"])
        for seed in args.seeds:
            for arm in args.arms:
                if (config.name, arm, seed) in done:
                    continue
                work = args.out / config.stem / arm / f"seed{seed}"
                print(f"{config.name} {arm} seed {seed}: {steps:,} steps in {work}", flush=True)
                if arm == "sb3_zoo":
                    curve, wall = sb3_arm(env_id, settings["data"].get("env_kwargs") or {},
                                          args.entry or env_id.replace("-v5", "-v4"), args.zoo_python, seed, steps,
                                          args.every, work)
                else:
                    curve, wall = lit_arm(config, arm, seed, steps, args.every, work)
                row = {"config": config.name, "arm": arm, "seed": seed, "steps": steps, "wall_s": round(wall, 1),
                       "curve": curve, "cpu": cpu_model(), "commit": commit(), "date": time.strftime("%Y-%m-%d")}
                with results.open("a") as f:
                    f.write(json.dumps(row) + "\n")
    rows = read_json_lines(results)
    header = (f"`python benchmarks/mujoco_speed.py {' '.join(sys.argv[1:] if argv is None else argv)}`: "
              f"{len(rows)} runs (the rows' CPUs: {', '.join(sorted({r['cpu'] for r in rows}))}), commits "
              f"{', '.join(sorted({r['commit'] for r in rows}))}")
    text = markdown(summarize(rows), header)
    print(text)
    if args.report:
        args.report.write_text(text)


if __name__ == "__main__":
    main()

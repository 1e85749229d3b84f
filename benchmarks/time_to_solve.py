"""Time to solve CartPole-v1: lit_ppo against Stable-Baselines3 with RL-Zoo's settings, and what start-up costs.

Solved = a deterministic evaluation of 20 episodes (one per fresh environment) scores a mean >= ``--target``.
Both arms evaluate every ``--eval-every`` environment steps and stop when solved:
- lit_ppo through its CLI (``--config``, default the shipped RL-Zoo ``cartpole.yaml``), evaluating as Lightning
  validation (``--trainer.check_val_every_n_epoch``); ``probes.SolveClock`` stops it and records the clock.
- SB3 PPO with the same hyperparameters (compare.py's ``zoo`` setting) and its own ``EvalCallback`` on a vector
  env of 20 CartPoles (20 episodes played side by side, as lit_ppo does), stopped at the target.
Reported per arm, median of the seeds: (a) seconds from the start of fit/learn to the solving evaluation's end,
(b) seconds from launching the process to that point, the environment steps, start-up (launch to the start of
fit/learn), and for lit_ppo the Trainer's set-up inside fit (to the first rollout) and the evaluations' time
within (a). Then start-up: fresh-process
times of importing each library, and the largest imports of ``lit_ppo.cli`` by ``python -X importtime``.

Where each arm's Python comes from decides much of (b). By default both run in this interpreter, where every
package installed here is importable, and torchmetrics (which Lightning imports) imports scipy.signal and
matplotlib whenever they are installed (~0.7 s), though lit_ppo needs neither. ``--venvs DIR`` runs each arm in
a virtual environment holding only what its own ``pip install`` brings (made under DIR on first use, reused
after): ``DIR/lit_ppo`` from this repository, ``DIR/sb3`` from ``stable-baselines3``, both with
``constraints/ci.txt``; the arms still import lit_ppo and these scripts from this checkout.

    python benchmarks/time_to_solve.py [--config cartpole.yaml] [--seeds 1 2 3] [--eval-every 2560] [--quick]
                                       [--venvs DIR]
"""

import argparse
import inspect
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from baselines import sb3_ppo
from compare import SETTINGS
from harness import REPO, check, installed, iterations, lit_ppo_cmd, median, read_json_lines, run_process

# Imported in a fresh process each, timed inside it: the whole process's wall time would add the interpreter's
# teardown (~0.7 s once Lightning is loaded), which happens after training and is no start-up cost.
IMPORTS = ("numpy", "torch", "gymnasium", "torch.utils.tensorboard", "lightning", "lit_ppo", "lit_ppo.cli",
           "stable_baselines3")


def sb3_solve_worker(hp: dict, seed: int, eval_every: int, target: float, out: str) -> None:
    """Runs inside its own process (launched by this script with --worker)."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback, EvalCallback
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)

    class RecordSolved(BaseCallback):
        # Called by EvalCallback after an evaluation that set a new best mean: stop once it reaches the target.
        def _on_step(self) -> bool:
            if self.parent.best_mean_reward < target:
                return True
            record(event="solved", time=time.time(), env_steps=self.num_timesteps,
                   return_mean=float(self.parent.best_mean_reward))
            return False

    def record(**event) -> None:
        with open(out, "a") as f:
            f.write(json.dumps(event) + "\n")

    model = sb3_ppo(PPO, hp, seed)
    eval_env = make_vec_env("CartPole-v1", n_envs=20, seed=seed + 1_000_003)
    # eval_freq counts calls of the vector env's step, i.e. num_envs environment steps each.
    callback = EvalCallback(eval_env, n_eval_episodes=20, eval_freq=eval_every // hp["num_envs"], deterministic=True,
                            callback_on_new_best=RecordSolved(), verbose=0)
    record(event="fit_start", time=time.time())
    model.learn(total_timesteps=iterations(hp) * hp["num_envs"] * hp["num_steps"], callback=callback)


def lit_ppo_arm(python: str, config: str, seed: int, eval_every_iterations: int, target: float, cwd: Path,
                extra: list) -> dict:
    clock = cwd / "clock.jsonl"
    args = ["--seed_everything", seed, "--trainer.check_val_every_n_epoch", eval_every_iterations, *extra]
    probe = {"class_path": "probes.SolveClock", "init_args": {"path": str(clock), "target": target}}
    run = check(run_process(lit_ppo_cmd(config, args, [probe], python), cwd), f"lit_ppo seed {seed}")
    return solve_times(run, read_json_lines(clock), target)


def sb3_arm(python: str, hp: dict, seed: int, eval_every: int, target: float, cwd: Path) -> dict:
    clock = cwd / "clock.jsonl"
    cmd = [python, Path(__file__).resolve(), "--worker", "--hp", json.dumps(hp), "--seed", seed,
           "--eval-every", eval_every, "--target", target, "--out", clock]
    run = check(run_process(cmd, cwd), f"sb3 seed {seed}")
    return solve_times(run, read_json_lines(clock), target)


def solve_times(run, events: list[dict], target: float) -> dict:
    start = next(e["time"] for e in events if e["event"] == "fit_start")
    solved = next((e for e in events if e["event"] in ("eval", "solved") and e["return_mean"] >= target), None)
    evals = [e for e in events if e["event"] == "eval" and (solved is None or e["time"] <= solved["time"])]
    train_start = next((e["time"] for e in events if e["event"] == "train_start"), None)
    return {"start_s": start - run.launched_at, "process_s": run.wall_s,
            # lit_ppo only: Trainer set-up inside fit, and the evaluations' share of (a)
            "setup_s": train_start and train_start - start, "evals_s": sum(e["eval_s"] for e in evals) if evals else None,
            "fit_s": solved and solved["time"] - start, "launch_s": solved and solved["time"] - run.launched_at,
            "steps": solved and solved["env_steps"]}


def import_times(pythons: dict, repeats: int, modules: tuple = IMPORTS) -> dict:
    """Median seconds of ``import m`` in a fresh process (m's dependencies included), in lit_ppo's interpreter
    (SB3's for stable_baselines3)."""
    times = {}
    for module in modules:
        python = pythons.get("sb3") if module == "stable_baselines3" else pythons["lit_ppo"]
        if python is None:
            continue
        code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
        runs = [float(subprocess.run([python, "-c", code], check=True, capture_output=True, text=True).stdout)
                for _ in range(repeats)]
        times[f"import {module}"] = median(runs)
    return times


def largest_imports(python: str, module: str, top: int) -> tuple[list, dict]:
    """``python -X importtime -c 'import module'``: self seconds summed per top-level package (no double
    counting), and the cumulative seconds of some heavy subtrees where they are first imported."""
    proc = subprocess.run([python, "-X", "importtime", "-c", f"import {module}"], capture_output=True,
                          text=True, check=True)
    per_package, subtrees = defaultdict(float), {}
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|\s*(\S+)", line)
        if m:
            name = m.group(3)
            per_package[name.split(".")[0]] += int(m.group(1)) / 1e6
            if name in HEAVY:
                subtrees[name] = int(m.group(2)) / 1e6
    return sorted(per_package.items(), key=lambda kv: -kv[1])[:top], subtrees


HEAVY = ("torch", "torch._dynamo", "lightning.fabric", "torchmetrics", "scipy.signal", "matplotlib", "sympy",
         "jsonargparse", "gymnasium", "tensorboard")


def venv_python(root: Path, requirement: str) -> str:
    """The interpreter of the virtual environment ``root``, made with ``pip install requirement`` if absent."""
    python, done = root / "bin" / "python", root / "installed.txt"
    if not done.exists():  # absent also when an earlier install failed half-way: make it again
        print(f"time_to_solve: making {root} (pip install {requirement}) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", root], check=True)
        subprocess.run([python, "-m", "pip", "install", "-q", "-c", REPO / "constraints" / "ci.txt", requirement],
                       check=True)
        done.write_text(requirement + "\n")
    return str(python)


def main() -> None:
    if "--worker" in sys.argv:
        p = argparse.ArgumentParser()
        for flag in ("--hp", "--out"):
            p.add_argument(flag, required=True)
        p.add_argument("--worker", action="store_true")
        p.add_argument("--seed", type=int, required=True)
        p.add_argument("--eval-every", type=int, required=True)
        p.add_argument("--target", type=float, required=True)
        a = p.parse_args()
        return sb3_solve_worker(json.loads(a.hp), a.seed, a.eval_every, a.target, a.out)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="cartpole.yaml", help="lit_ppo's config (SB3 always runs RL-Zoo's)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--eval-every", type=int, default=2560, help="SB3: environment steps between evaluations")
    parser.add_argument("--lit-eval-every", type=int, default=None,
                        help="lit_ppo: iterations between evaluations (default: --eval-every / 256, RL-Zoo's rollout)")
    parser.add_argument("--total-timesteps", type=int, default=100_000, help="SB3's budget if never solved "
                        "(lit_ppo's is its config's, or --data.total_timesteps)")
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--startup-repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a seconds-long smoke run")
    parser.add_argument("--venvs", type=Path, default=None,
                        help="run each arm in a virtual environment of its own install only, kept under this folder")
    args, extra = parser.parse_known_args()  # extra: lit_ppo CLI overrides
    hp = dict(SETTINGS["zoo"], total_timesteps=args.total_timesteps)
    if args.quick:
        args.seeds, args.startup_repeats, args.eval_every = args.seeds[:1], 1, 256
        hp["total_timesteps"] = 512
        extra += ["--data.total_timesteps", "512"]
    # The same evaluation cadence in environment steps for both arms: lit_ppo's iterations are its config's.
    # (Imported here, not at the top: this file is also the SB3 worker, whose start-up must not include Lightning.)
    import yaml

    from lit_ppo.cli import shipped_config
    from lit_ppo.collection.datamodule import PPODataModule

    with open(shipped_config(args.config)) as f:
        data = yaml.safe_load(f).get("data", {})
    defaults = inspect.signature(PPODataModule).parameters  # what a setting the config leaves out is
    per_iteration = (data.get("num_envs", defaults["num_envs"].default)
                     * data.get("num_steps", defaults["num_steps"].default))
    lit_every = args.lit_eval_every or max(args.eval_every // per_iteration, 1)
    if args.venvs:
        pythons = {"lit_ppo": venv_python(args.venvs.resolve() / "lit_ppo", str(REPO)),
                   "sb3": venv_python(args.venvs.resolve() / "sb3", "stable-baselines3")}
    else:
        pythons = {"lit_ppo": sys.executable, "sb3": sys.executable if installed("stable_baselines3") else None}
    arms = [arm for arm, python in pythons.items() if python]
    if "sb3" not in arms:
        print("time_to_solve: stable_baselines3 is not installed: lit_ppo only.")
    print(f"time_to_solve: CartPole-v1, solved = 20-episode deterministic eval mean >= {args.target:g}, SB3 "
          f"evaluates every {args.eval_every} steps, lit_ppo every {lit_every} iterations; lit_ppo --config "
          f"{args.config} {' '.join(extra)}; SB3 RL-Zoo settings, budget {hp['total_timesteps']:,} steps; "
          f"one torch thread; seeds {args.seeds}; "
          + (f"each arm in its own virtual environment under {args.venvs}" if args.venvs else
             "both arms in this interpreter (every package installed here importable)"))
    results = defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        for rep, seed in enumerate(args.seeds):
            for arm in arms[rep % len(arms):] + arms[:rep % len(arms)]:
                cwd = Path(tmp) / f"{arm}-{seed}"
                r = (lit_ppo_arm(pythons[arm], args.config, seed, lit_every, args.target, cwd, extra) if arm == "lit_ppo"
                     else sb3_arm(pythons[arm], hp, seed, args.eval_every, args.target, cwd))
                results[arm].append(r)
                print(f"  {arm} seed {seed}: " + ", ".join(f"{k} {v if v is None else round(v, 2)}" for k, v in r.items()),
                      flush=True)
    print(f"\n{'arm':<8} {'solved':>6} {'env steps':>10} {'(a) fit s':>10} {'(b) launch s':>12} {'start-up s':>10} "
          f"{'fit set-up s':>12} {'evals s':>8} {'process s':>9}")
    meds = {}
    for arm, runs in results.items():
        hits = [r for r in runs if r["fit_s"] is not None]
        meds[arm] = m = {k: median([r[k] for r in hits]) for k in ("steps", "fit_s", "launch_s", "evals_s")}
        m["start_s"], m["setup_s"] = median([r["start_s"] for r in runs]), median([r["setup_s"] for r in runs])
        print(f"{arm:<8} {f'{len(hits)}/{len(runs)}':>6} {m['steps']:>10,.0f} {m['fit_s']:>10.2f} {m['launch_s']:>12.2f} "
              f"{m['start_s']:>10.2f} {m['setup_s']:>12.2f} {m['evals_s']:>8.2f} "
              f"{median([r['process_s'] for r in runs]):>9.2f}")
    if "sb3" in meds:
        a, b = meds["lit_ppo"], meds["sb3"]
        print(f"lit_ppo/SB3: (a) {a['fit_s'] / b['fit_s']:.2f}x (target <= 0.33), (b) {a['launch_s'] / b['launch_s']:.2f}x "
              f"(target <= 0.6), start-up {a['start_s'] / b['start_s']:.2f}x")
    print(f"\nstart-up: seconds to import, in a fresh process, median of {args.startup_repeats}")
    # --quick times the one import the table's start-up column is about (each module is a fresh process)
    modules = ("lit_ppo.cli",) if args.quick else IMPORTS
    for name, seconds in import_times(pythons, args.startup_repeats, modules).items():
        print(f"  {name:<32} {seconds:6.2f} s")
    packages, subtrees = largest_imports(pythons["lit_ppo"], "lit_ppo.cli", 8)
    print("largest imports of `import lit_ppo.cli`, self time summed per top-level package:")
    for package, seconds in packages:
        print(f"  {package:<32} {seconds:6.2f} s")
    print("  ... and cumulative seconds of subtrees, where first imported:")
    for name, seconds in subtrees.items():
        print(f"  {name:<32} {seconds:6.2f} s")


if __name__ == "__main__":
    main()

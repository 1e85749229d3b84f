"""The anchor run beside a multi-agent results row: BenchMARL's own MAPPO (its default experiment, algorithm and
model configs) on the VMAS task a shipped config trains, at the same budget, then its final evaluation.

    python benchmarks/benchmarl_anchor.py --config vmas_navigation.yaml --seeds 1 2 3 --python /path/to/venv/bin/python

BenchMARL (``pip install benchmarl``; it brings TorchRL) runs in the interpreter ``--python`` names, in a process of
its own per seed, so that its dependencies stay out of lit_ppo's environment. The task is BenchMARL's own yaml for
the scenario (``benchmarl/conf/task/vmas/<scenario>.yaml``) with the shipped config's ``env_kwargs`` and
``max_steps`` written over it (the two are checked equal and the differences printed); the budget is the config's
``data.total_timesteps`` agent steps, which BenchMARL counts as frames of all agents at once (``/ n_agents``). Per
seed it writes ``OUT/<config>/seed<S>/result.json`` (the final and best evaluation, BenchMARL's
``eval/reward/episode_reward_mean``: the mean over its evaluation episodes and agents of each agent's return, as
lit_ppo's ``eval/return_mean``; the wall time of ``Experiment.run`` with one torch thread, as lit_ppo's configs
run; versions, CPU) and prints the table.
"""

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from harness import REPO

CONFIG_DIR = REPO / "lit_ppo" / "configs"
OUT = REPO / "benchmarks" / "results" / "anchors" / "benchmarl"


def worker(spec: dict) -> dict:
    """One BenchMARL MAPPO run (in BenchMARL's interpreter): its final and best evaluation and wall time."""
    import benchmarl
    from benchmarl.algorithms import MappoConfig
    from benchmarl.environments import VmasTask
    from benchmarl.experiment import Experiment, ExperimentConfig
    from benchmarl.models.mlp import MlpConfig

    import torch

    torch.set_num_threads(1)  # one core per run, as lit_ppo's configs (torch_threads: 1) and learning.py run theirs
    task = getattr(VmasTask, spec["scenario"].upper()).get_from_yaml()
    differences = {k: (task.config.get(k), v) for k, v in spec["task"].items() if task.config.get(k) != v}
    task.config.update(spec["task"])
    config = ExperimentConfig.get_from_yaml()
    config.max_n_frames = spec["frames"]
    config.loggers, config.render, config.create_json = ["csv"], False, False
    config.checkpoint_at_end, config.save_folder = False, spec["save_folder"]
    experiment = Experiment(task=task, algorithm_config=MappoConfig.get_from_yaml(),
                            model_config=MlpConfig.get_from_yaml(), critic_model_config=MlpConfig.get_from_yaml(),
                            seed=spec["seed"], config=config)
    start = time.perf_counter()
    experiment.run()
    wall = time.perf_counter() - start
    [curve] = Path(spec["save_folder"]).glob("*/*/scalars/eval_reward_episode_reward_mean.csv")
    # BenchMARL logs against its iteration (one per collected batch): an evaluation's frames are (iteration + 1) x batch
    batch = config.on_policy_collected_frames_per_batch
    evaluations = [((int(float(step)) + 1) * batch, float(value))
                   for step, value in (line.split(",") for line in curve.read_text().split())]
    return {"final": evaluations[-1][1], "final_at_frames": evaluations[-1][0],
            "best": max(value for _, value in evaluations), "evaluations": evaluations, "wall_s": round(wall, 1),
            "frames": spec["frames"], "task": task.config, "task_differences_from_benchmarl": differences,
            "benchmarl": benchmarl.__version__, "experiment": {k: getattr(config, k) for k in (
                "lr", "gamma", "on_policy_collected_frames_per_batch", "on_policy_n_envs_per_worker",
                "on_policy_n_minibatch_iters", "on_policy_minibatch_size", "evaluation_interval",
                "evaluation_episodes")}}


def cpu_model() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), "?")


def spec_of(config_name: str) -> dict:
    config = yaml.safe_load((CONFIG_DIR / config_name).read_text())
    rows = config["data"]["vectorization"]
    if not str(rows.get("class_path", "")).endswith("vmas_rows"):
        raise SystemExit(f"--config: {config_name} does not train a VMAS scenario (data.vectorization: {rows}).")
    init = rows["init_args"]
    task = {**(init.get("env_kwargs") or {}), "max_steps": init["max_steps"]}
    return {"scenario": init["scenario"], "task": task,
            "frames": config["data"]["total_timesteps"] // task["n_agents"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="vmas_navigation.yaml", help="a shipped config of a VMAS scenario")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--python", default=sys.executable, help="the interpreter BenchMARL is installed in")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--frames", type=int, help="replace the config's budget (a smoke run; not a result)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # a JSON spec: run one seed here, print its result
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    spec = spec_of(args.config)
    if args.frames:
        spec["frames"] = args.frames
    finals = []
    for seed in args.seeds:
        directory = args.out / Path(args.config).stem / f"seed{seed}"
        if (directory / "result.json").exists():
            result = json.loads((directory / "result.json").read_text())
        else:
            with tempfile.TemporaryDirectory() as save_folder:
                run = {**spec, "seed": seed, "save_folder": save_folder}
                proc = subprocess.run([args.python, __file__, "--worker", json.dumps(run)], capture_output=True,
                                      text=True, cwd=Path(__file__).parent)
                if proc.returncode:
                    raise SystemExit(f"BenchMARL seed {seed} failed:\n{proc.stderr[-3000:]}")
                result = json.loads(proc.stdout.strip().splitlines()[-1])
                [curve] = Path(save_folder).glob("*/*/scalars/eval_reward_episode_reward_mean.csv")
                directory.mkdir(parents=True, exist_ok=True)
                shutil.copy(curve, directory / "eval_curve.csv")
            result.update(config=args.config, seed=seed, cpu=cpu_model(), date=time.strftime("%Y-%m-%d"))
            (directory / "result.json").write_text(json.dumps(result, indent=1) + "\n")
        finals.append(result["final"])
        print(f"seed {seed}: final {result['final']:.3f}, best {result['best']:.3f}, {result['frames']:,} frames "
              f"in {result['wall_s'] / 60:.1f} min (BenchMARL {result['benchmarl']})", flush=True)
    spread = statistics.pstdev(finals) if len(finals) > 1 else 0.0
    print(f"BenchMARL MAPPO on {spec['scenario']}, {len(finals)} seeds: final {statistics.mean(finals):.3f} "
          f"+- {spread:.3f} (per agent per episode)")


if __name__ == "__main__":
    main()

"""The anchor run beside a results row: RL-Zoo's own ``train.py`` with its published PPO hyperparameters, on this
machine, for the env a shipped config trains, then its final policy on 20 deterministic episodes (as
``benchmarks/learning.py`` scores lit_ppo's). Where a lit_ppo row misses RL-Zoo's published score, this tells a
bug in lit_ppo (RL-Zoo here reaches its number) from a setting that does not reproduce (RL-Zoo here misses too).

    pip install rl-zoo3   # not a lit_ppo extra: it pins its own rich/huggingface stack; a venv is best
    python benchmarks/rl_zoo_anchor.py --env Hopper-v5 --entry Hopper-v4 --seed 1 [--steps 1000000]

``--entry`` names the hyperparameter entry of RL-Zoo's ``hyperparams/ppo.yml`` to use (RL-Zoo has no v5 entries
for MuJoCo: the v4 one is copied under the v5 id, as the shipped configs translate it). Writes
``--out/<env>_<seed>/result.json`` with the final score and RL-Zoo's in-fit evaluations (10 deterministic episodes
every ``--eval-freq`` steps), and skips a finished run.
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

EVAL_EPISODES = 20


def evaluate(model_path: Path, stats: Optional[Path], env_id: str, seed: int,
             env_kwargs: Optional[dict] = None) -> dict:
    """A saved SB3 PPO model with its VecNormalize statistics (frozen; ``stats`` None or missing where the run did
    not normalize), on fresh deterministic episodes of ``env_id`` made with ``env_kwargs`` (those it trained on)."""
    import numpy as np
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    envs = make_vec_env(env_id, n_envs=EVAL_EPISODES, seed=seed + 1_000_003, env_kwargs=env_kwargs)
    if stats is not None and stats.exists():
        envs = VecNormalize.load(str(stats), envs)
        envs.training, envs.norm_reward = False, False
    model = PPO.load(str(model_path), device="cpu")
    obs = envs.reset()
    returns, lengths = np.zeros(EVAL_EPISODES), np.zeros(EVAL_EPISODES)
    finished = np.zeros(EVAL_EPISODES, dtype=bool)
    while not finished.all():  # each env's first episode only (a VecEnv resets by itself)
        obs, reward, done, infos = envs.step(model.predict(obs, deterministic=True)[0])
        raw = np.array([info.get("episode", {}).get("r", np.nan) for info in infos])
        returns = np.where(done & ~finished, raw, returns)
        lengths = np.where(done & ~finished, [info.get("episode", {}).get("l", 0) for info in infos], lengths)
        finished |= done
    return {"return_mean": float(returns.mean()), "return_std": float(returns.std()),
            "length_mean": float(lengths.mean()), "episodes": EVAL_EPISODES}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", required=True, help="the env id to train (e.g. Hopper-v5)")
    parser.add_argument("--entry", help="RL-Zoo's hyperparameter entry (default: --env)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, help="default: the entry's n_timesteps")
    parser.add_argument("--eval-freq", type=int, default=102_400)
    parser.add_argument("--out", type=Path, default=Path("bench_runs/rl_zoo"))
    args = parser.parse_args()
    import rl_zoo3
    import yaml

    entries = yaml.safe_load((Path(rl_zoo3.__file__).parent / "hyperparams" / "ppo.yml").read_text())
    entry = dict(entries[args.entry or args.env])
    steps = args.steps or int(float(entry["n_timesteps"]))
    work = args.out / f"{args.env}_{args.seed}"
    result_path = work / "result.json"
    if result_path.exists():
        print(result_path.read_text())
        return
    work.mkdir(parents=True, exist_ok=True)
    conf = work / "hyperparams.yml"
    conf.write_text(yaml.safe_dump({args.env: entry}))
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rl_zoo3.train", "--algo", "ppo", "--env", args.env, "--conf-file",
                    str(conf), "--seed", str(args.seed), "-n", str(steps), "--eval-freq", str(args.eval_freq),
                    "--eval-episodes", "10", "--log-folder", str(work / "logs"), "--device", "cpu",
                    "--num-threads", "1", "--verbose", "0"], check=True)
    fit_s = time.perf_counter() - start
    # RL-Zoo numbers its runs _1, _2, ...: a run restarted after an interruption is the newest
    run_dir = max((work / "logs" / "ppo").glob(f"{args.env}_*"), key=lambda p: int(p.name.rsplit("_", 1)[1]))
    import numpy as np

    curve = np.load(run_dir / "evaluations.npz")
    result = {"env_id": args.env, "entry": args.entry or args.env, "seed": args.seed, "steps": steps,
              "rl_zoo3": rl_zoo3.__version__ if hasattr(rl_zoo3, "__version__") else "?",
              "final": evaluate(run_dir / f"{args.env}.zip", run_dir / args.env / "vecnormalize.pkl", args.env, args.seed), "fit_wall_s": round(fit_s, 1),
              "in_fit_evaluations": [[int(t), float(r.mean())] for t, r in zip(curve["timesteps"], curve["results"])]}
    result_path.write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

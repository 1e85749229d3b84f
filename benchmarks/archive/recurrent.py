"""Archived study.

Measured 2026-12-01 (evening) on a shared 2-core Intel Xeon, a learning run on the other core (docs/performance.md
and docs/networks.md, committed at 956c320); last changed at c14418a (2026-12-01).
Question: how fast is lit_ppo's recurrent path against sb3-contrib's ``RecurrentPPO`` at ``cartpole_pomdp.yaml``'s
settings? Answer: 1,590 against 353 training steps/s (medians of seeds 1-3): 4.5x; 1.3x before f97fbee.
Not maintained or tested: it may need commit c14418a to run (``git worktree add DIR c14418a``). It imports the
helpers in benchmarks/, so run it as ``PYTHONPATH=benchmarks python benchmarks/archive/recurrent.py``.

Recurrent PPO speed: lit_ppo's ``configs/cartpole_pomdp.yaml`` against sb3-contrib's ``RecurrentPPO`` at the same
settings, arms alternating per seed in one invocation, each in its own process; prints training steps per second
(training time only: each library's own learning loop, imports and start-up left out), the medians and their ratio,
and each run's deterministic 20-episode evaluation.

Same settings: CartPole-v1 without velocities (cart position and pole angle), 8 envs x 32 steps, one minibatch of
256 (all 8 sequences), 20 epochs, gamma 0.98, lambda 0.8, lr 1e-3 and clip 0.2 annealed linearly, no entropy bonus,
max grad norm 0.5; one LSTM of 128 units shared by actor and critic, then [64, 64] tanh MLPs (sb3-contrib:
``shared_lstm=True, enable_critic_lstm=False``; its critic reads the LSTM's features detached, lit_ppo's
backpropagates into them, CleanRL's way). One torch thread per arm.

    pip install sb3-contrib            # the reference arm
    python benchmarks/archive/recurrent.py --steps 50000 --seeds 1 2 3

Worker mode (``--worker sb3_contrib``) runs one reference run in this process and writes its JSON result.
"""

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

from harness import REPO, check, installed, lit_ppo_cmd, median, read_lit_ppo_metrics, run_process

CONFIG = REPO / "configs" / "cartpole_pomdp.yaml"
HP = dict(num_envs=8, num_steps=32, batch_size=256, update_epochs=20, gamma=0.98, gae_lambda=0.8, lr=1e-3,
          clip_coef=0.2, ent_coef=0.0, vf_coef=0.5, max_grad_norm=0.5, lstm_hidden_size=128)
EVAL_EPISODES = 20


def sb3_contrib_worker(steps: int, seed: int) -> dict:
    import gymnasium as gym
    import numpy as np
    import torch
    from baselines import without_sb3_log_dir
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.env_util import make_vec_env

    from lit_ppo.wrappers import KeepObservationIndices

    wrapper = dict(wrapper_class=KeepObservationIndices, wrapper_kwargs={"indices": [0, 2]})
    env = make_vec_env("CartPole-v1", n_envs=HP["num_envs"], seed=seed, **wrapper)
    model = RecurrentPPO(
        "MlpLstmPolicy", env, n_steps=HP["num_steps"], batch_size=HP["batch_size"], n_epochs=HP["update_epochs"],
        gamma=HP["gamma"], gae_lambda=HP["gae_lambda"], learning_rate=lambda remaining: remaining * HP["lr"],
        clip_range=lambda remaining: remaining * HP["clip_coef"], ent_coef=HP["ent_coef"],
        vf_coef=HP["vf_coef"] / 2,  # SB3's value loss has no factor 0.5
        max_grad_norm=HP["max_grad_norm"], seed=seed, device="cpu", verbose=0,
        policy_kwargs=dict(lstm_hidden_size=HP["lstm_hidden_size"], n_lstm_layers=1, shared_lstm=True,
                           enable_critic_lstm=False, net_arch=dict(pi=[64, 64], vf=[64, 64])),
    )
    without_sb3_log_dir(model)
    start = time.perf_counter()
    model.learn(total_timesteps=steps)
    train_s = time.perf_counter() - start
    # deterministic evaluation, the LSTM state carried and reset at each episode's start
    envs = gym.vector.SyncVectorEnv([lambda: KeepObservationIndices(gym.make("CartPole-v1"), [0, 2])] * EVAL_EPISODES)
    obs, _ = envs.reset(seed=seed + 1_000_003)
    state, starts = None, np.ones(EVAL_EPISODES, dtype=bool)
    returns, finished = np.zeros(EVAL_EPISODES), np.zeros(EVAL_EPISODES, dtype=bool)
    with torch.inference_mode():
        while not finished.all():
            action, state = model.predict(obs, state=state, episode_start=starts, deterministic=True)
            starts[:] = False
            obs, reward, terminated, truncated, _ = envs.step(action)
            returns += reward * ~finished
            finished |= terminated | truncated
    envs.close()
    return dict(steps=model.num_timesteps, train_s=train_s, eval_return=float(returns.mean()))


def run_arm(arm: str, steps: int, seed: int, cwd: Path) -> dict:
    if arm == "sb3_contrib":
        out = cwd / "result.json"
        check(run_process([sys.executable, __file__, "--worker", "sb3_contrib", "--steps", steps, "--seed", seed,
                           "--out", out], cwd), arm)
        return json.loads(out.read_text())
    iterations = steps // (HP["num_envs"] * HP["num_steps"])
    # one evaluation, after the last rollout (its time is not in the last rollout's elapsed_s)
    args = ["--seed_everything", seed, "--data.total_timesteps", steps, "--trainer.check_val_every_n_epoch", iterations]
    check(run_process(lit_ppo_cmd(str(CONFIG), args), cwd), arm)
    rollouts, evals = read_lit_ppo_metrics(cwd)
    last = rollouts[-1]
    return dict(steps=int(last["time/env_steps"]), train_s=last["time/elapsed_s"], eval_return=evals[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worker", choices=["sb3_contrib"])
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--dir", type=Path, default=Path("bench_runs/recurrent"))
    args = parser.parse_args()
    if args.worker:
        import torch

        torch.set_num_threads(1)
        args.out.write_text(json.dumps(sb3_contrib_worker(args.steps, args.seed)))
        return
    if not installed("sb3_contrib"):
        raise SystemExit("the reference arm needs sb3-contrib: pip install sb3-contrib")
    cpu = next((line.split(":", 1)[1].strip() for line in subprocess.run(["lscpu"], capture_output=True, text=True)
                .stdout.splitlines() if line.startswith("Model name")), platform.processor())
    print(f"# {' '.join(['python', *sys.argv])}\n# CPU: {cpu}; {args.steps} steps per run, seeds {args.seeds}")
    results: dict[str, list] = {"lit_ppo": [], "sb3_contrib": []}
    for i, seed in enumerate(args.seeds):
        arms = ["lit_ppo", "sb3_contrib"] if i % 2 == 0 else ["sb3_contrib", "lit_ppo"]  # alternate the order
        for arm in arms:
            result = run_arm(arm, args.steps, seed, args.dir / f"{arm}_seed{seed}")
            result["sps"] = result["steps"] / result["train_s"]
            results[arm].append(result)
            print(f"{arm:12s} seed {seed}: {result['sps']:8.0f} steps/s ({result['steps']} steps in "
                  f"{result['train_s']:.1f} s), evaluation {result['eval_return']:.1f}", flush=True)
    lit, ref = (median([r["sps"] for r in results[a]]) for a in ("lit_ppo", "sb3_contrib"))
    print(f"\nmedian steps/s: lit_ppo {lit:.0f}, sb3-contrib RecurrentPPO {ref:.0f}; lit_ppo/sb3-contrib {lit / ref:.2f}x")


if __name__ == "__main__":
    main()

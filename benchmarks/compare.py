"""lit_ppo against Stable-Baselines3 PPO and a CleanRL-style PPO loop, on CartPole-v1, same hyperparameters.

Settings (``--settings``):
- ``zoo``: RL-Zoo's CartPole PPO: 8 envs x 32 steps, one minibatch of 256, 20 epochs, gamma 0.98, lambda 0.8,
  lr 1e-3 and clip 0.2 annealed linearly, no entropy bonus, 100k steps.
- ``cleanrl``: CleanRL ``ppo.py``'s defaults: 4 envs x 128 steps, 4 minibatches, 4 epochs, gamma 0.99,
  lambda 0.95, lr 2.5e-4 annealed, clip 0.2, entropy 0.01, 500k steps.
Both: value coefficient 0.5 on 0.5 x MSE (SB3's value loss has no 0.5, so SB3 gets ``vf_coef`` 0.25: the same
loss), no value clipping, per-minibatch advantage normalization, gradient norm 0.5, Adam eps 1e-5, separate
64-64 tanh actor and critic, orthogonal init. Every arm runs with ``--threads`` torch intra-op threads (default
1; 0 = torch's default).

Each run is its own process (its peak RSS is its own): lit_ppo through its CLI (``python -m lit_ppo fit``, CSV
logger, no checkpoints, one deterministic evaluation at the end as Lightning validation), SB3 and the CleanRL
loop as workers of this script. The arm order rotates every seed to cancel machine drift. Reported per arm:
median SPS (environment steps / training seconds), environment steps and training seconds until the running mean
of the last 100 training episodes first reaches ``--target`` (checked after each rollout's updates), the final
deterministic 20-episode evaluation, and peak RSS; then the ratios lit_ppo/SB3 and lit_ppo/CleanRL.

    python benchmarks/compare.py [--settings zoo cleanrl] [--seeds 1 2 3] [--threads 1] [--quick]
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from harness import check, installed, lit_ppo_args, lit_ppo_cmd, median, read_lit_ppo_metrics, run_process

SETTINGS = {
    "zoo": dict(num_envs=8, num_steps=32, num_minibatches=1, update_epochs=20, gamma=0.98, gae_lambda=0.8,
                lr=1e-3, anneal_lr=True, clip_coef=0.2, anneal_clip=True, ent_coef=0.0, vf_coef=0.5,
                max_grad_norm=0.5, total_timesteps=100_000),
    "cleanrl": dict(num_envs=4, num_steps=128, num_minibatches=4, update_epochs=4, gamma=0.99, gae_lambda=0.95,
                    lr=2.5e-4, anneal_lr=True, clip_coef=0.2, anneal_clip=False, ent_coef=0.01, vf_coef=0.5,
                    max_grad_norm=0.5, total_timesteps=500_000),
}
ARMS = ("lit_ppo", "sb3", "cleanrl")
EVAL_EPISODES = 20
EVAL_SEED_OFFSET = 1_000_003  # lit_ppo's evaluation seeds: the same initial states for every arm


def iterations(hp: dict) -> int:
    return hp["total_timesteps"] // (hp["num_envs"] * hp["num_steps"])


# -- the workers: each runs in its own process, imports its library there, and writes one JSON result ------------
def evaluate(act, seed: int) -> float:
    """Mean return of the first episode of each of 20 CartPoles seeded as lit_ppo's evaluation seeds them."""
    import gymnasium as gym
    import numpy as np

    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * EVAL_EPISODES)
    obs, _ = envs.reset(seed=seed + EVAL_SEED_OFFSET)
    returns, finished = np.zeros(EVAL_EPISODES), np.zeros(EVAL_EPISODES, dtype=bool)
    while not finished.all():
        obs, reward, terminated, truncated, _ = envs.step(act(obs))
        returns += reward * ~finished
        finished |= terminated | truncated
    envs.close()
    return float(returns.mean())


class Solve:
    """The first iteration at which the running mean training return reaches the target."""

    def __init__(self, target: float) -> None:
        self.target, self.steps, self.seconds = target, None, None

    def check(self, mean_return: float, steps: int, seconds: float) -> None:
        if self.steps is None and mean_return >= self.target:
            self.steps, self.seconds = steps, seconds


def sb3_worker(hp: dict, seed: int, target: float) -> dict:
    import numpy as np
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    solve = Solve(target)

    class TimedPPO(PPO):
        # Checked after each rollout's updates, as lit_ppo logs rollout/return_mean.
        def train(self) -> None:
            super().train()
            if self.ep_info_buffer:  # SB3's own window of the last 100 episodes
                mean = float(np.mean([info["r"] for info in self.ep_info_buffer]))
                solve.check(mean, self.num_timesteps, time.perf_counter() - start)

    def schedule(value: float, anneal: bool):
        return (lambda remaining: remaining * value) if anneal else value

    env = make_vec_env("CartPole-v1", n_envs=hp["num_envs"], seed=seed)
    model = TimedPPO(
        "MlpPolicy", env, n_steps=hp["num_steps"], batch_size=hp["num_envs"] * hp["num_steps"] // hp["num_minibatches"],
        n_epochs=hp["update_epochs"], gamma=hp["gamma"], gae_lambda=hp["gae_lambda"],
        learning_rate=schedule(hp["lr"], hp["anneal_lr"]), clip_range=schedule(hp["clip_coef"], hp["anneal_clip"]),
        ent_coef=hp["ent_coef"], vf_coef=hp["vf_coef"] / 2, max_grad_norm=hp["max_grad_norm"], seed=seed,
        device="cpu", verbose=0,
    )
    steps = iterations(hp) * hp["num_envs"] * hp["num_steps"]  # whole rollouts, as the other arms run
    start = time.perf_counter()
    model.learn(total_timesteps=steps)
    train_s = time.perf_counter() - start
    with torch.inference_mode():
        eval_return = evaluate(lambda obs: model.predict(obs, deterministic=True)[0], seed)
    return dict(steps=model.num_timesteps, train_s=train_s, steps_to_target=solve.steps,
                seconds_to_target=solve.seconds, eval_return=eval_return)


def cleanrl_worker(hp: dict, seed: int, target: float) -> dict:
    """CleanRL's ppo.py algorithm, written from its description: Categorical distributions, plain Adam, a
    TensorBoard-free loop. As CleanRL, an episode end by time limit is not bootstrapped; same-step autoreset
    gives the observation semantics CleanRL was written for (gymnasium < 1.0)."""
    import random
    from collections import deque

    import gymnasium as gym
    import numpy as np
    import torch
    from torch import nn
    from torch.distributions import Categorical

    def layer(n_in: int, n_out: int, gain: float) -> nn.Linear:
        lin = nn.Linear(n_in, n_out)
        nn.init.orthogonal_(lin.weight, gain)
        nn.init.constant_(lin.bias, 0.0)
        return lin

    class Agent(nn.Module):
        def __init__(self, n_obs: int, n_act: int) -> None:
            super().__init__()
            g = np.sqrt(2)
            self.critic = nn.Sequential(layer(n_obs, 64, g), nn.Tanh(), layer(64, 64, g), nn.Tanh(), layer(64, 1, 1.0))
            self.actor = nn.Sequential(layer(n_obs, 64, g), nn.Tanh(), layer(64, 64, g), nn.Tanh(),
                                       layer(64, n_act, 0.01))

        def get_value(self, x):
            return self.critic(x)

        def get_action_and_value(self, x, action=None):
            dist = Categorical(logits=self.actor(x))
            if action is None:
                action = dist.sample()
            return action, dist.log_prob(action), dist.entropy(), self.critic(x)

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    N, T = hp["num_envs"], hp["num_steps"]
    B = N * T
    mb = B // hp["num_minibatches"]
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * N, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    agent = Agent(envs.single_observation_space.shape[0], envs.single_action_space.n)
    optimizer = torch.optim.Adam(agent.parameters(), lr=hp["lr"], eps=1e-5)

    obs = torch.zeros((T, N, envs.single_observation_space.shape[0]))
    actions, logprobs, rewards, dones, values = (torch.zeros((T, N)) for _ in range(5))
    recent = deque(maxlen=100)
    solve = Solve(target)
    n_iter = iterations(hp)
    start = time.perf_counter()
    next_obs = torch.Tensor(envs.reset(seed=seed)[0])
    next_done = torch.zeros(N)
    for iteration in range(1, n_iter + 1):
        frac = 1.0 - (iteration - 1.0) / n_iter
        if hp["anneal_lr"]:
            optimizer.param_groups[0]["lr"] = frac * hp["lr"]
        clip_coef = hp["clip_coef"] * (frac if hp["anneal_clip"] else 1.0)
        for step in range(T):
            obs[step], dones[step] = next_obs, next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
            values[step], actions[step], logprobs[step] = value.flatten(), action, logprob
            next_obs_np, reward, terminations, truncations, info = envs.step(action.cpu().numpy())
            rewards[step] = torch.tensor(reward).view(-1)
            next_obs, next_done = torch.Tensor(next_obs_np), torch.Tensor(np.logical_or(terminations, truncations))
            if "_episode" in info:
                recent.extend(info["episode"]["r"][info["_episode"]].tolist())

        with torch.no_grad():  # GAE, CleanRL's backward recursion
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = 0
            for t in reversed(range(T)):
                nextnonterminal = 1.0 - (next_done if t == T - 1 else dones[t + 1])
                nextvalues = next_value if t == T - 1 else values[t + 1]
                delta = rewards[t] + hp["gamma"] * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = delta + hp["gamma"] * hp["gae_lambda"] * nextnonterminal * lastgaelam
            returns = advantages + values

        b_obs, b_logprobs, b_actions = obs.reshape(B, -1), logprobs.reshape(-1), actions.reshape(-1)
        b_advantages, b_returns, b_values = advantages.reshape(-1), returns.reshape(-1), values.reshape(-1)
        b_inds = np.arange(B)
        clipfracs = []
        for _ in range(hp["update_epochs"]):
            np.random.shuffle(b_inds)
            for lo in range(0, B, mb):
                idx = b_inds[lo:lo + mb]
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[idx], b_actions.long()[idx])
                logratio = newlogprob - b_logprobs[idx]
                ratio = logratio.exp()
                with torch.no_grad():  # CleanRL's diagnostics, read every minibatch
                    approx_kl = ((ratio - 1) - logratio).mean()
                    clipfracs += [((ratio - 1.0).abs() > clip_coef).float().mean().item()]
                mb_adv = b_advantages[idx]
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg_loss = torch.max(-mb_adv * ratio, -mb_adv * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)).mean()
                v_loss = 0.5 * ((newvalue.view(-1) - b_returns[idx]) ** 2).mean()
                loss = pg_loss - hp["ent_coef"] * entropy.mean() + v_loss * hp["vf_coef"]
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), hp["max_grad_norm"])
                optimizer.step()
        y_pred, y_true = b_values.numpy(), b_returns.numpy()
        _explained_var = 1 - np.var(y_true - y_pred) / np.var(y_true) if np.var(y_true) else np.nan
        _ = approx_kl.item()
        if recent:
            solve.check(float(np.mean(recent)), iteration * B, time.perf_counter() - start)
    train_s = time.perf_counter() - start
    with torch.no_grad():
        eval_return = evaluate(lambda o: agent.actor(torch.Tensor(o)).argmax(-1).numpy(), seed)
    return dict(steps=n_iter * B, train_s=train_s, steps_to_target=solve.steps, seconds_to_target=solve.seconds,
                eval_return=eval_return)


WORKERS = {"sb3": sb3_worker, "cleanrl": cleanrl_worker}


def worker_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", choices=WORKERS, required=True)
    parser.add_argument("--hp", required=True, help="JSON hyperparameters")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    result = WORKERS[args.worker](json.loads(args.hp), args.seed, args.target)
    Path(args.out).write_text(json.dumps(result))


# -- the driver ----------------------------------------------------------------------------------------------------
def run_arm(arm: str, hp: dict, seed: int, threads: int, target: float, cwd: Path, lit_args: list) -> dict:
    if arm == "lit_ppo":
        # One validation, after the last rollout's updates: the final deterministic evaluation.
        args = lit_ppo_args(hp, seed, threads or None) + ["--trainer.check_val_every_n_epoch", iterations(hp), *lit_args]
        run = check(run_process(lit_ppo_cmd("cartpole.yaml", args), cwd), f"lit_ppo seed {seed}")
        rows, evals = read_lit_ppo_metrics(cwd)
        # The last row's clock includes the final evaluation: SPS from the row before it.
        timed = rows[-2] if len(rows) > 1 else rows[-1]
        hit = next((r for r in rows if r.get("rollout/return_mean", 0) >= target), None)
        result = dict(steps=rows[-1]["time/env_steps"], train_s=timed["time/elapsed_s"] * rows[-1]["time/env_steps"]
                      / timed["time/env_steps"], steps_to_target=hit and hit["time/env_steps"],
                      seconds_to_target=hit and hit["time/elapsed_s"], eval_return=evals[-1])
    else:
        out = cwd / "result.json"
        cmd = [sys.executable, Path(__file__).resolve(), "--worker", arm, "--hp", json.dumps(hp), "--seed", seed,
               "--threads", threads, "--target", target, "--out", out]
        run = check(run_process(cmd, cwd), f"{arm} seed {seed}")
        result = json.loads(out.read_text())
    result.update(arm=arm, seed=seed, sps=result["steps"] / result["train_s"], peak_rss_mb=run.peak_rss_mb,
                  process_s=run.wall_s)
    return result


def fmt(value, spec: str) -> str:
    return "-" if value is None or value != value else format(value, spec)


def print_table(setting: str, hp: dict, results: list[dict], target: float) -> None:
    print(f"\n{setting}: {hp['num_envs']} envs x {hp['num_steps']} steps, {hp['num_minibatches']} minibatch(es), "
          f"{hp['update_epochs']} epochs, {iterations(hp) * hp['num_envs'] * hp['num_steps']:,} steps, "
          f"seeds {sorted({r['seed'] for r in results})}")
    print(f"{'arm':<8} {'SPS med':>8} {'SPS min-max':>13} {'steps to ' + format(target, 'g'):>14} "
          f"{'train s to':>10} {'solved':>6} {'eval ret':>8} {'train s':>8} {'RSS MB':>7}")
    meds = {}
    for arm in ARMS:
        runs = [r for r in results if r["arm"] == arm]
        if not runs:
            continue
        hits = [r for r in runs if r["steps_to_target"] is not None]
        meds[arm] = m = {"sps": median([r["sps"] for r in runs]),
                         "steps": median([r["steps_to_target"] for r in hits]),
                         "secs": median([r["seconds_to_target"] for r in hits]),
                         "rss": median([r["peak_rss_mb"] for r in runs])}
        sps = [r["sps"] for r in runs]
        print(f"{arm:<8} {m['sps']:>8.0f} {f'{min(sps):.0f}-{max(sps):.0f}':>13} {fmt(m['steps'], ',.0f'):>14} "
              f"{fmt(m['secs'], '.1f'):>10} {f'{len(hits)}/{len(runs)}':>6} "
              f"{median([r['eval_return'] for r in runs]):>8.1f} {median([r['train_s'] for r in runs]):>8.1f} "
              f"{m['rss']:>7.0f}")
    for other, name in (("sb3", "SB3"), ("cleanrl", "CleanRL")):
        if "lit_ppo" in meds and other in meds:
            a, b = meds["lit_ppo"], meds[other]
            print(f"lit_ppo/{name}: SPS {a['sps'] / b['sps']:.2f}x, steps to {target:g} "
                  f"{fmt(a['steps'] / b['steps'], '.2f')}x, train seconds to {target:g} "
                  f"{fmt(a['secs'] / b['secs'], '.2f')}x, peak RSS {a['rss'] / b['rss']:.2f}x")


def main() -> None:
    if "--worker" in sys.argv:
        return worker_main(sys.argv[1:])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", nargs="+", choices=SETTINGS, default=list(SETTINGS))
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--zoo-steps", type=int, default=SETTINGS["zoo"]["total_timesteps"])
    parser.add_argument("--cleanrl-steps", type=int, default=SETTINGS["cleanrl"]["total_timesteps"])
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads in every arm; 0: torch's default")
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--json", help="also write every run's result to this file")
    parser.add_argument("--lit-args", default="", help="extra lit_ppo CLI arguments, appended (they win)")
    parser.add_argument("--quick", action="store_true", help="a seconds-long smoke run: one seed, 2 iterations")
    args = parser.parse_args()
    settings = {name: dict(SETTINGS[name]) for name in args.settings}
    settings.get("zoo", {})["total_timesteps"] = args.zoo_steps
    settings.get("cleanrl", {})["total_timesteps"] = args.cleanrl_steps
    if args.quick:
        args.seeds = args.seeds[:1]
        for hp in settings.values():
            hp["total_timesteps"] = 2 * hp["num_envs"] * hp["num_steps"]
    arms = [a for a in args.arms if a != "sb3" or installed("stable_baselines3")]
    if len(arms) < len(args.arms):
        print('compare: stable_baselines3 is not installed (pip install -c constraints/ci.txt -e ".[bench]"): '
              "no SB3 arm.")
    print(f"compare: CartPole-v1, torch threads per arm: {args.threads or 'torch default'}, arms {arms}, "
          f"seeds {args.seeds}")
    results = {name: [] for name in settings}
    with tempfile.TemporaryDirectory() as tmp:
        for rep, seed in enumerate(args.seeds):
            order = arms[rep % len(arms):] + arms[:rep % len(arms)]  # rotate: each arm early and late once
            for name, hp in settings.items():
                for arm in order:
                    r = run_arm(arm, hp, seed, args.threads, args.target, Path(tmp) / f"{name}-{arm}-{seed}",
                                args.lit_args.split())
                    results[name].append(r)
                    print(f"  {name} {arm} seed {seed}: {r['sps']:.0f} SPS, solved at {fmt(r['steps_to_target'], ',.0f')} "
                          f"steps, eval {r['eval_return']:.1f}, {r['peak_rss_mb']:.0f} MB, process {r['process_s']:.1f} s",
                          flush=True)
    for name, hp in settings.items():
        print_table(name, hp, results[name], args.target)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()

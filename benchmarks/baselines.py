"""The arms of compare.py that are not lit_ppo: Stable-Baselines3's PPO and a CleanRL-style PPO loop, each run in
its own process by the benchmarks (``python benchmarks/baselines.py --worker sb3|cleanrl --hp JSON ...``), importing
its library there and writing one JSON result: environment steps, training seconds, when the running mean of the
last 100 training episodes first reached the target (checked after each rollout's updates), the median time of a
rollout's updates (``learn_ms``, as lit_ppo's ``time/learn_ms``: the first rollout's left out), and a deterministic
20-episode evaluation on lit_ppo's evaluation seeds.
"""

import argparse
import json
import time
from pathlib import Path

from harness import iterations, median_after_first

EVAL_EPISODES = 20
EVAL_SEED_OFFSET = 1_000_003  # lit_ppo's evaluation seeds: the same initial states for every arm


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


def without_sb3_log_dir(model):
    """``model`` logging nowhere: with ``verbose=0`` and no ``tensorboard_log``, SB3 would still create an empty
    ``/tmp/SB3-<date>`` directory at every ``learn``."""
    from stable_baselines3.common.logger import Logger

    model.set_logger(Logger(folder=None, output_formats=[]))
    return model


def sb3_ppo(ppo_class, hp: dict, seed: int):
    """SB3's ``PPO`` (or a subclass) on CartPole-v1 with the hyperparameters ``hp`` (compare.SETTINGS' keys): the one
    translation every benchmark uses. SB3's value loss has no factor 0.5, so it gets half of ``vf_coef``."""
    from stable_baselines3.common.env_util import make_vec_env

    def schedule(value: float, anneal: bool):
        return (lambda remaining: remaining * value) if anneal else value

    env = make_vec_env("CartPole-v1", n_envs=hp["num_envs"], seed=seed)
    return without_sb3_log_dir(ppo_class(
        "MlpPolicy", env, n_steps=hp["num_steps"], batch_size=hp["num_envs"] * hp["num_steps"] // hp["num_minibatches"],
        n_epochs=hp["update_epochs"], gamma=hp["gamma"], gae_lambda=hp["gae_lambda"],
        learning_rate=schedule(hp["lr"], hp["anneal_lr"]), clip_range=schedule(hp["clip_coef"], hp["anneal_clip"]),
        ent_coef=hp["ent_coef"], vf_coef=hp["vf_coef"] / 2, max_grad_norm=hp["max_grad_norm"], seed=seed,
        device="cpu", verbose=0,
    ))


def sb3_worker(hp: dict, seed: int, target: float) -> dict:
    import numpy as np
    import torch
    from stable_baselines3 import PPO

    solve = Solve(target)
    learn_ms = []

    class TimedPPO(PPO):
        # Checked after each rollout's updates, as lit_ppo logs rollout/return_mean.
        def train(self) -> None:
            t0 = time.perf_counter()
            super().train()  # SB3's whole update phase: its epochs of minibatch updates and their logger records
            learn_ms.append((time.perf_counter() - t0) * 1e3)
            if self.ep_info_buffer:  # SB3's own window of the last 100 episodes
                mean = float(np.mean([info["r"] for info in self.ep_info_buffer]))
                solve.check(mean, self.num_timesteps, time.perf_counter() - start)

    model = sb3_ppo(TimedPPO, hp, seed)
    steps = iterations(hp) * hp["num_envs"] * hp["num_steps"]  # whole rollouts, as the other arms run
    start = time.perf_counter()
    model.learn(total_timesteps=steps)
    train_s = time.perf_counter() - start
    with torch.inference_mode():
        eval_return = evaluate(lambda obs: model.predict(obs, deterministic=True)[0], seed)
    return dict(steps=model.num_timesteps, train_s=train_s, steps_to_target=solve.steps,
                seconds_to_target=solve.seconds, eval_return=eval_return, learn_ms=median_after_first(learn_ms))


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
    if hp.get("vectorization", "sync") == "native":
        # CartPoleVectorEnv (next-step autoreset). As CleanRL on gymnasium 1.x, the reset steps are trained on,
        # not masked: as a speed bound it does less work than a correct loop.
        envs = gym.make_vec("CartPole-v1", N, vectorization_mode="vector_entry_point")
    else:
        same_step = gym.vector.AutoresetMode.SAME_STEP
        envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * N, autoreset_mode=same_step)
    envs = gym.wrappers.vector.RecordEpisodeStatistics(envs)
    agent = Agent(envs.single_observation_space.shape[0], envs.single_action_space.n)
    optimizer = torch.optim.Adam(agent.parameters(), lr=hp["lr"], eps=1e-5)

    obs = torch.zeros((T, N, envs.single_observation_space.shape[0]))
    actions, logprobs, rewards, dones, values = (torch.zeros((T, N)) for _ in range(5))
    recent = deque(maxlen=100)
    solve = Solve(target)
    learn_ms = []
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
        learn_start = time.perf_counter()
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
        # What CleanRL computes per iteration for its logs (the writes themselves are left out, as in every arm).
        y_pred, y_true = b_values.numpy(), b_returns.numpy()
        _explained_var = 1 - np.var(y_true - y_pred) / np.var(y_true) if np.var(y_true) else np.nan
        _logged = (approx_kl.item(), float(np.mean(clipfracs)))
        learn_ms.append((time.perf_counter() - learn_start) * 1e3)
        if recent:
            solve.check(float(np.mean(recent)), iteration * B, time.perf_counter() - start)
    train_s = time.perf_counter() - start
    with torch.no_grad():
        eval_return = evaluate(lambda o: agent.actor(torch.Tensor(o)).argmax(-1).numpy(), seed)
    return dict(steps=n_iter * B, train_s=train_s, steps_to_target=solve.steps, seconds_to_target=solve.seconds,
                eval_return=eval_return, learn_ms=median_after_first(learn_ms))


WORKERS = {"sb3": sb3_worker, "cleanrl": cleanrl_worker}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", choices=WORKERS, required=True)
    parser.add_argument("--hp", required=True, help="JSON hyperparameters")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    result = WORKERS[args.worker](json.loads(args.hp), args.seed, args.target)
    Path(args.out).write_text(json.dumps(result))



if __name__ == "__main__":
    main()

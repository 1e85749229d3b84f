"""Archived study.

Measured 2026-12-03 on a 2-core AMD EPYC (Zen 3), beside two other runs (docs/hardware.md, committed at
fa08123); last changed at 0f23b27 (2026-12-04: import paths after the layout move).
Question: what does ``model.decoupled``'s extra no-grad pass over the rollout add to an update? Answer: ~3%,
15.1 of 598.1 ms at ``halfcheetah.yaml``'s shapes. It imports lit_ppo's internal modules, which may move.
Not maintained or tested: it may need commit 0f23b27 to run (``git worktree add DIR 0f23b27``).

What ``model.decoupled`` adds to a rollout's update: :func:`lit_ppo.learning.decoupled.decouple` (one no-grad forward pass
over the rollout) against the update itself (``update_epochs`` passes of minibatch steps), in one process at
``halfcheetah.yaml``'s shapes by default (HalfCheetah-v5's 17-dim observations and 6-dim actions, 1 x 2,048 samples,
10 epochs of 32 minibatches of 64, a 64-64 MLP, one torch thread). Medians of ``--repeats``.

    python benchmarks/archive/decoupled_cost.py [--env-id HalfCheetah-v5] [--samples 2048] [--minibatch-size 64]
"""

import argparse
import statistics
import time

import torch

from lit_ppo import PPODataModule, PPOModule
from lit_ppo.collection.rollout import Rollout
from lit_ppo.learning.decoupled import decouple
from lit_ppo.learning.objective import PPOObjective


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="HalfCheetah-v5")
    parser.add_argument("--samples", type=int, default=2048)
    parser.add_argument("--minibatch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    data = PPODataModule(env_id=args.env_id, num_envs=1, num_steps=args.samples, minibatch_size=args.minibatch_size,
                         update_epochs=args.epochs)
    model = PPOModule(env_spec=data.env_spec)
    spec = data.env_spec
    n, empty = args.samples, torch.zeros(0)
    # The values do not matter for the timing, only the shapes: a random rollout of the env's spaces.
    rollout = Rollout(
        obs=torch.randn(n, *spec["observation"]["shape"]), actions=torch.randn(n, *spec["action"]["shape"]),
        logprobs=torch.randn(n) - 8.0, values=torch.randn(n), advantages=torch.randn(n), returns=torch.randn(n),
        minibatch_indices=torch.stack([torch.randperm(n) for _ in range(args.epochs)]).view(
            args.epochs, -1, args.minibatch_size),
        reward_returns=empty, episode_returns=empty, episode_lengths=empty, policy_lag=1)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4, eps=1e-5, fused=True)

    def update(batch: Rollout) -> None:
        for index in batch.minibatch_indices.flatten(0, 1):
            loss, _ = model.objective(PPOObjective.prepare(batch.samples(index), True), 0.2)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    decouple_s, update_s = [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        decoupled = decouple(model.policy, rollout)
        decouple_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        update(decoupled)
        update_s.append(time.perf_counter() - start)
    d, u = statistics.median(decouple_s), statistics.median(update_s)
    print(f"{args.env_id}, {n} samples, {args.epochs} x {n // args.minibatch_size} minibatches: decouple "
          f"{d * 1e3:.1f} ms, update {u * 1e3:.1f} ms, decouple / update {d / u:.3f}")


if __name__ == "__main__":
    main()

"""Archived study.

Measured 2026-12-02 on a 2-core AMD EPYC (Zen 5), three runs (docs/performance.md, committed at 7eb08d4 and
3e0f139; earlier on the Xeon and on 2026-11-30's EPYC); last changed at 0f23b27 (2026-12-04: import paths after
the layout move).
Question: what does the Trainer cost over a plain PyTorch loop doing the same update? Answer: wall time 1.095x
(median of 1.191, 1.063 and 1.095; the target was <= 1.15). Its plain arm re-implements ``PPOModule``'s update
loop by hand, so it silently drifts from the module at every change to the update: that is why it is archived.
Not maintained or tested: it may need commit 0f23b27 to run (``git worktree add DIR 0f23b27``).

CartPole SPS through the real product path, and Lightning's cost per optimizer step over a plain loop.

Both arms run the same work (same config, same rollouts, same loss code, same optimizer and clipping); only
the loop differs. Arms alternate A/B to cancel machine drift; medians are printed.

    python benchmarks/archive/overhead.py [--config cartpole.yaml] [--total-timesteps 51200] [--repeats 3]
"""

import argparse
import statistics
import time

import lightning as L
import torch
import yaml

from lit_ppo import PPODataModule, PPOModule
from lit_ppo.collection.acting import Actor
from lit_ppo.cli import shipped_config


def _build(config: dict, total_timesteps: int, seed: int):
    L.seed_everything(seed, verbose=False)
    data_args = dict(config.get("data", {}), total_timesteps=total_timesteps, seed=seed)
    dm = PPODataModule(**data_args)
    model = PPOModule(env_spec=dm.env_spec, **config.get("model", {}))
    return dm, model


def run_lightning(config: dict, total_timesteps: int, seed: int) -> tuple[float, int]:
    dm, model = _build(config, total_timesteps, seed)
    trainer = L.Trainer(accelerator="cpu", devices=1, max_epochs=-1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                        limit_val_batches=0)
    start = time.perf_counter()
    trainer.fit(model, dm)
    return time.perf_counter() - start, trainer.global_step


def run_plain(config: dict, total_timesteps: int, seed: int) -> tuple[float, int]:
    """The same PPO update in a plain PyTorch loop over the same RolloutDataset: the module's own objective
    (``model.objective``, a :class:`lit_ppo.learning.objective.PPOObjective`), torch's backward, clipping and optimizer step,
    no Trainer."""
    dm, model = _build(config, total_timesteps, seed)
    hp = model.hparams
    optimizer = torch.optim.Adam(model.parameters(), lr=hp.lr, eps=1e-5, fused=True)  # as configure_optimizers
    params = list(model.parameters())
    dataset = dm.build_rollout_dataset(Actor(model.policy))  # the same acting as in the Trainer
    steps = 0
    start = time.perf_counter()
    for _ in range(dataset.num_iterations):
        for rollout in dataset:  # one Rollout, as the module's training_step gets it
            remaining = 1.0 - rollout.budget_fraction
            for group in optimizer.param_groups:
                group["lr"] = hp.lr * (remaining if hp.anneal_lr else 1.0)
            clip_coef = hp.clip_coef * (remaining if hp.anneal_clip else 1.0)
            sums = torch.zeros(5)
            whole = None
            for idx in rollout.minibatch_indices.flatten(0, 1):
                if idx.numel() == rollout.size:
                    whole = whole if whole is not None else model.objective.prepare(rollout.samples(), hp.norm_adv)
                    batch = whole
                else:
                    batch = model.objective.prepare(rollout.samples(idx), hp.norm_adv)
                loss, terms = model.objective(batch, clip_coef)
                sums += terms
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if hp.max_grad_norm:
                    torch.nn.utils.clip_grad_norm_(params, hp.max_grad_norm)
                optimizer.step()
                steps += 1
            sums.tolist()  # the per-rollout read-out the Lightning arm logs
            model.policy.update_normalization(rollout.obs, rollout.reward_returns if rollout.reward_returns.numel()
                                              else None)
    elapsed = time.perf_counter() - start
    dataset.collector.close()
    return elapsed, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="cartpole.yaml")
    parser.add_argument("--total-timesteps", type=int, default=51_200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with open(shipped_config(args.config)) as f:
        config = yaml.safe_load(f)
    results = {"lightning": [], "plain": []}
    for rep in range(args.repeats):
        for arm, fn in (("lightning", run_lightning), ("plain", run_plain))[:: 1 if rep % 2 == 0 else -1]:
            elapsed, steps = fn(config, args.total_timesteps, seed=rep + 1)
            results[arm].append((elapsed, steps))
    med = {arm: statistics.median(e for e, _ in runs) for arm, runs in results.items()}
    opt_steps = results["lightning"][0][1]
    print(f"config={args.config} total_timesteps={args.total_timesteps} threads={args.threads} "
          f"repeats={args.repeats} optimizer_steps={opt_steps} (torch {torch.__version__}, lightning {L.__version__})")
    print(f"{'arm':<10} {'median s':>9} {'SPS':>9}")
    for arm in ("lightning", "plain"):
        print(f"{arm:<10} {med[arm]:9.2f} {args.total_timesteps / med[arm]:9.0f}")
    overhead_ms = (med["lightning"] - med["plain"]) / opt_steps * 1e3
    print(f"Lightning/plain time ratio: {med['lightning'] / med['plain']:.3f}  "
          f"(overhead {overhead_ms:+.3f} ms per optimizer step; target ratio <= 1.15)")


if __name__ == "__main__":
    main()

"""CartPole SPS through the real product path, and Lightning's cost per optimizer step over a plain loop.

Both arms run the same work (same config, same rollouts, same loss code, same optimizer and clipping); only
the loop differs. Arms alternate A/B to cancel machine drift; medians are printed.

    python benchmarks/overhead.py [--config cartpole.yaml] [--total-timesteps 51200] [--repeats 3]
"""

import argparse
import statistics
import time

import lightning as L
import torch
import yaml

from lit_ppo.cli import _shipped
from lit_ppo.data import PPODataModule
from lit_ppo.module import PPOModule, clip_grad_norm


def _build(config: dict, total_timesteps: int, seed: int):
    L.seed_everything(seed, verbose=False)
    data_args = dict(config.get("data", {}), total_timesteps=total_timesteps, seed=seed)
    dm = PPODataModule(**data_args)
    model = PPOModule(env_spec=dm.env_spec, **config.get("model", {}))
    return dm, model


def run_lightning(config: dict, total_timesteps: int, seed: int) -> tuple[float, int]:
    dm, model = _build(config, total_timesteps, seed)
    clip = config.get("trainer", {}).get("gradient_clip_val")
    trainer = L.Trainer(accelerator="cpu", devices=1, max_epochs=-1, gradient_clip_val=clip, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        num_sanity_val_steps=0, limit_val_batches=0)
    start = time.perf_counter()
    trainer.fit(model, dm)
    return time.perf_counter() - start, trainer.global_step


def run_plain(config: dict, total_timesteps: int, seed: int) -> tuple[float, int]:
    """The same PPO update in a plain PyTorch loop over the same RolloutDataset: the module's own minibatch
    preparation, loss code and clipping, torch's backward and optimizer step, no Trainer."""
    dm, model = _build(config, total_timesteps, seed)
    hp = model.hparams
    clip = config.get("trainer", {}).get("gradient_clip_val")
    optimizer = model.build_optimizer()
    params = list(model.parameters())
    iterations = total_timesteps // (dm.hparams.num_envs * dm.hparams.num_steps)
    dataset = dm.build_rollout_dataset(model.acting_policy)  # the same acting as in the Trainer
    steps = 0
    start = time.perf_counter()
    for it in range(iterations):
        frac = 1.0 - it / iterations
        for group in optimizer.param_groups:
            group["lr"] = hp.lr * (frac if hp.anneal_lr else 1.0)
        model.clip_coef = hp.clip_coef * (frac if hp.anneal_clip else 1.0)
        model._loss_sums, model._updates = torch.zeros(5), 0
        for item in dataset:  # one rollout and its minibatch order, as the module's training_step gets them
            rollout, size = item["rollout"], item["rollout"]["advantages"].shape[0]
            whole = None
            for idx in item["minibatch_indices"].flatten(0, 1):
                if idx.numel() == size:
                    whole = whole if whole is not None else model._prepare_minibatch(rollout)
                    batch = whole
                else:
                    batch = model._prepare_minibatch({k: v[idx] for k, v in rollout.items()})
                loss = model._minibatch_loss(batch)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if clip:
                    clip_grad_norm(params, clip)
                optimizer.step()
                steps += 1
        model._loss_sums.tolist()  # the per-rollout read-out the Lightning arm logs
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
    with open(_shipped(args.config)) as f:
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

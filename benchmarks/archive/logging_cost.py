"""Archived study.

Measured 2026-12-01 on a shared 2-core Intel Xeon (docs/performance.md, committed at 0cfc0f9); last changed at
efbbf06 (2026-12-01).
Question: what does ``self.log`` cost for a rollout's metrics against one ``Logger.log_metrics`` call? Answer:
25 keys through ``log_dict`` 9.6-14.5 ms a step, through ``log_metrics`` 0.013 ms; hence lit_ppo logs rollouts
through ``log_metrics`` and uses ``self.log`` only for the keys a callback monitors.
Not maintained or tested: it may need commit efbbf06 to run (``git worktree add DIR efbbf06``).

What logging a rollout's metrics costs: ``LightningModule.log_dict`` against one ``Logger.log_metrics`` call.

A minimal module logs ``--keys`` scalars once per training step (one step per epoch, as lit_ppo's rollouts) for
``--epochs`` epochs, each way in turn, with a CSV logger; the median time of the logging call is printed.

    python benchmarks/archive/logging_cost.py [--keys 25] [--epochs 200]
"""

import argparse
import statistics
import tempfile
import time

import lightning as L
import torch
from torch.utils.data import DataLoader, IterableDataset


class OneBatch(IterableDataset):
    def __len__(self):
        return 1

    def __iter__(self):
        yield torch.zeros(1)


class Logs(L.LightningModule):
    def __init__(self, how: str, keys: int):
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.automatic_optimization = False
        self.how, self.keys, self.seconds = how, keys, []

    def training_step(self, batch, batch_idx):
        metrics = {f"group{i % 4}/metric{i}": float(i) for i in range(self.keys)}
        start = time.perf_counter()
        if self.how == "log_dict":
            self.log_dict(metrics, on_step=True, on_epoch=False)
        else:
            for logger in self.loggers:
                logger.log_metrics(metrics, step=self.global_step)
        self.seconds.append(time.perf_counter() - start)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), 0.1)

    def train_dataloader(self):
        return DataLoader(OneBatch(), batch_size=None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=25)
    parser.add_argument("--epochs", type=int, default=200)
    args = parser.parse_args()
    print(f"{args.keys} keys per step, {args.epochs} steps (lightning {L.__version__}, torch {torch.__version__})")
    medians = {}
    with tempfile.TemporaryDirectory() as tmp:
        for how in ("log_dict", "log_metrics"):
            module = Logs(how, args.keys)
            trainer = L.Trainer(max_epochs=args.epochs, logger=L.pytorch.loggers.CSVLogger(tmp), log_every_n_steps=1,
                                enable_progress_bar=False, enable_checkpointing=False, enable_model_summary=False)
            trainer.fit(module)
            medians[how] = statistics.median(module.seconds[10:])
            print(f"{how:<12} median {medians[how] * 1e3:8.3f} ms per step")
    print(f"log_dict / log_metrics: {medians['log_dict'] / medians['log_metrics']:.0f}x")


if __name__ == "__main__":
    main()

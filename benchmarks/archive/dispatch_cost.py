"""Archived study.

Measured 2026-12-02 on a 2-core AMD EPYC (Zen 5) (docs/performance.md, committed at 7eb08d4 and 3e0f139); last
changed at 795cff7 (2026-12-02).
Question: what does Lightning's manual-optimization path (``manual_backward``, the Lightning optimizer's step,
``clip_gradients``) cost per optimizer step, apart from the model's work? Answer: 64-86 us (89-116 us with 4
callbacks), 1.3-1.7 ms of the ~26 ms of updates in an RL-Zoo CartPole rollout.
Not maintained or tested: it may need commit 795cff7 to run (``git worktree add DIR 795cff7``).

Lightning's fixed cost per optimizer step under manual optimization, apart from any model's work.

The same tiny step (a 4-float parameter: loss, ``zero_grad``, backward, clipping to norm 0.5, fused Adam) runs
``--steps`` times in three arms, alternating, each repeat in the same process:

- ``plain``: ``loss.backward()``, ``torch.nn.utils.clip_grad_norm_``, ``optimizer.step()``;
- ``lightning``: inside one ``training_step``, as lit_ppo's update does it: ``self.manual_backward``, the Lightning
  optimizer's ``step`` and ``self.clip_gradients`` in ``on_before_optimizer_step``, no callbacks;
- ``lightning+callbacks``: the same with ``--callbacks`` no-op callbacks and a ``ModelCheckpoint`` (every hook
  dispatch visits each callback), as a CLI fit with checkpoints, a progress bar and a config saver has.

Printed: the median microseconds per step of each arm and what Lightning adds per step. This is the part of
``benchmarks/archive/overhead.py``'s Lightning/plain ratio that no change inside lit_ppo's update can remove (it is the
documented manual-optimization path); at PPO's small minibatches it is a fixed cost per update.

    python benchmarks/archive/dispatch_cost.py [--steps 2000] [--repeats 5] [--callbacks 3]
"""

import argparse
import logging
import statistics
import tempfile
import time

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint


class StepLoop(L.LightningModule):
    """``steps`` optimizer steps in one ``training_step``, timed there (the Trainer's start-up left out)."""

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.weight = torch.nn.Parameter(torch.zeros(4))
        self.steps, self.us_per_step = steps, float("nan")

    def training_step(self, batch, batch_idx: int) -> None:
        optimizer = self.optimizers()
        start = time.perf_counter()
        for _ in range(self.steps):
            loss = (self.weight ** 2).sum()
            optimizer.zero_grad()
            self.manual_backward(loss)
            optimizer.step()
        self.us_per_step = (time.perf_counter() - start) / self.steps * 1e6

    def on_before_optimizer_step(self, optimizer) -> None:
        self.clip_gradients(optimizer, gradient_clip_val=0.5, gradient_clip_algorithm="norm")

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), fused=True)

    def train_dataloader(self):
        return [0]


def run_plain(steps: int) -> float:
    weight = torch.nn.Parameter(torch.zeros(4))
    optimizer = torch.optim.Adam([weight], fused=True)
    start = time.perf_counter()
    for _ in range(steps):
        loss = (weight ** 2).sum()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_([weight], 0.5)
        optimizer.step()
    return (time.perf_counter() - start) / steps * 1e6


def run_lightning(steps: int, callbacks: list) -> float:
    model = StepLoop(steps)
    checkpointing = any(isinstance(c, ModelCheckpoint) for c in callbacks)
    L.Trainer(accelerator="cpu", devices=1, max_epochs=1, logger=False, enable_checkpointing=checkpointing,
              enable_progress_bar=False, enable_model_summary=False, callbacks=callbacks).fit(model)
    return model.us_per_step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--callbacks", type=int, default=3, help="no-op callbacks beside the ModelCheckpoint")
    args = parser.parse_args()
    torch.set_num_threads(1)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)  # not the Trainer's start-up lines at every fit
    times = {"plain": [], "lightning": [], "lightning+callbacks": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            times["plain"].append(run_plain(args.steps))
            times["lightning"].append(run_lightning(args.steps, []))
            callbacks = [ModelCheckpoint(dirpath=tmp, save_top_k=0)] + [Callback() for _ in range(args.callbacks)]
            times["lightning+callbacks"].append(run_lightning(args.steps, callbacks))
    med = {arm: statistics.median(t) for arm, t in times.items()}
    print(f"{args.steps} optimizer steps of a 4-float parameter, {args.repeats} repeats, one torch thread "
          f"(torch {torch.__version__}, lightning {L.__version__})")
    print(f"{'arm':<22} {'us/step':>8}")
    for arm, value in med.items():
        print(f"{arm:<22} {value:>8.1f}")
    print(f"Lightning adds {med['lightning'] - med['plain']:.1f} us per optimizer step, "
          f"{med['lightning+callbacks'] - med['plain']:.1f} us with {args.callbacks + 1} callbacks")


if __name__ == "__main__":
    main()

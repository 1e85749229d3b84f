"""Lightning callbacks that the benchmarks add to lit_ppo's CLI runs (``--trainer.callbacks``), to read out what
the logged metrics cannot give: absolute clock times (to compare with the launching process) and memory.

They write JSON lines to a file named by the benchmark; the benchmark's directory must be on ``PYTHONPATH``.
"""

import json
import resource
import time

import lightning as L
from lightning.pytorch.callbacks import Callback


def rss_mb() -> float:
    """Current resident set size of this process (Linux /proc), in MiB."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


class _JsonLines(Callback):
    def __init__(self, path: str) -> None:
        self.path = path

    def write(self, **record) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")


class SolveClock(_JsonLines):
    """Records when ``fit`` starts and when a validation (deterministic evaluation) first reaches ``target``,
    as ``time.time()`` so the launcher can subtract its own launch time, then stops training: time to solve
    needs nothing after that point."""

    def __init__(self, path: str, target: float = 475.0) -> None:
        super().__init__(path)
        self.target = target

    def setup(self, trainer: "L.Trainer", pl_module: "L.LightningModule", stage: str) -> None:
        # The first hook of Trainer.fit (before strategy setup, data loaders and environments).
        if stage == "fit":
            self.write(event="fit_start", time=time.time())

    def on_train_start(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> None:
        self.write(event="train_start", time=time.time())  # set-up done: the first rollout starts now

    def on_validation_start(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> None:
        self.eval_start = time.time()

    def on_validation_end(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> None:
        value = trainer.callback_metrics.get("eval/return_mean")
        if trainer.sanity_checking or value is None:
            return
        # Validation runs after the updates of epoch e, so the policy has seen (e + 1) rollouts.
        steps = (trainer.current_epoch + 1) * trainer.datamodule.steps_per_iteration
        now = time.time()
        self.write(event="eval", time=now, env_steps=steps, return_mean=float(value), eval_s=now - self.eval_start)
        if float(value) >= self.target:
            trainer.should_stop = True


class RSSProbe(_JsonLines):
    """Current and peak RSS after every rollout's updates, with the environment steps so far."""

    def on_train_epoch_end(self, trainer: "L.Trainer", pl_module: "L.LightningModule") -> None:
        steps = (trainer.current_epoch + 1) * trainer.datamodule.steps_per_iteration
        self.write(env_steps=steps, rss_mb=rss_mb(), peak_mb=peak_rss_mb(), time=time.time())

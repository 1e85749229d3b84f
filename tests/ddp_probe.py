"""A callback for the DDP tests: each rank writes what it holds at the end of training to rank<R>.pt in the
working directory (the final parameters and the observations of its last rollout)."""

import lightning as L
import torch


class RankProbe(L.Callback):
    def on_train_end(self, trainer, pl_module):
        collector = trainer.datamodule.train_dataset.collector
        torch.save({"params": {k: v.detach().cpu() for k, v in pl_module.policy.state_dict().items()},
                    "obs": collector.buffers["obs"].clone(), "world_size": trainer.world_size},
                   f"rank{trainer.global_rank}.pt")


class LastCheckpointProbe(L.Callback):
    """Records, at the start of every iteration, the global step that last.ckpt holds (written to
    last_ckpt_steps.pt at the end): which iterations a crash would resume from."""

    def __init__(self, path: str = "runs/cartpole/checkpoints/last.ckpt") -> None:
        self.path, self.steps = path, []

    def on_train_epoch_start(self, trainer, pl_module):
        import os

        if trainer.current_epoch > 0:
            self.steps.append(torch.load(self.path, weights_only=False)["global_step"] if os.path.exists(self.path)
                              else None)

    def on_train_end(self, trainer, pl_module):
        torch.save(self.steps, "last_ckpt_steps.pt")

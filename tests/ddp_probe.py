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

"""PPOModule learns from any data module that yields the documented Rollout: nothing else crosses over."""

import lightning as L
import torch
from torch.utils.data import DataLoader, IterableDataset

from lit_ppo import PPOModule
from lit_ppo.collection.rollout import SAMPLE, Rollout, fields_with_role
from lit_ppo.envs.env_spec import describe_spaces

ITERATIONS, ENVS, STEPS = 4, 2, 8
B = ENVS * STEPS


class OwnRollouts(IterableDataset):
    """Made-up rollouts of a 4-dim observation and 2 actions: no environment, no PPODataModule."""

    def __init__(self):
        self.done = 0
        self.generator = torch.Generator().manual_seed(0)

    def __len__(self):
        return 1

    def __iter__(self):
        g = self.generator
        values = torch.randn(B, generator=g)
        advantages = torch.randn(B, generator=g)
        rollout = Rollout(
            obs=torch.randn(B, 4, generator=g), actions=torch.randint(0, 2, (B,), generator=g),
            logprobs=torch.full((B,), -0.6931), values=values, advantages=advantages, returns=advantages + values,
            minibatch_indices=torch.stack([torch.randperm(B, generator=g) for _ in range(2)]).view(2, 2, B // 2),
            reward_returns=torch.zeros(0),
            episode_returns=torch.tensor([float(self.done + 1)]), episode_lengths=torch.tensor([3.0]),
            timings={"env_ms": 1.0}, env_steps=(self.done + 1) * B, budget_fraction=self.done / ITERATIONS,
            final=self.done + 1 == ITERATIONS,
        )
        self.done += 1
        yield rollout


class OwnData(L.LightningDataModule):
    def __init__(self):
        super().__init__()
        self.dataset = OwnRollouts()

    def train_dataloader(self):
        return DataLoader(self.dataset, batch_size=None)


class Metrics(L.pytorch.loggers.Logger):
    """A real Lightning logger that keeps what it is given in memory."""

    name, version = "memory", 0

    def __init__(self):
        super().__init__()
        self.rows = []

    def log_metrics(self, metrics, step):
        self.rows.append(dict(metrics, step=step))

    def log_hyperparams(self, params, *args, **kwargs):
        pass


def test_ppo_module_trains_from_a_data_module_of_its_own(tmp_path):
    env_spec = describe_spaces("CartPole-v1")  # the spaces only: 4-dim Box observations, Discrete(2) actions
    model = PPOModule(env_spec=env_spec, hidden_sizes=[8], lr=0.01, anneal_lr=True)
    before = [p.detach().clone() for p in model.parameters()]
    logger = Metrics()
    trainer = L.Trainer(max_epochs=-1, logger=logger, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=tmp_path)
    trainer.fit(model, OwnData())
    # the rollout's `final` flag stopped training; 2 passes x 2 minibatches per rollout
    assert trainer.current_epoch == ITERATIONS and trainer.global_step == ITERATIONS * 4
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    rows = [r for r in logger.rows if "time/env_steps" in r]
    assert [r["time/env_steps"] for r in rows] == [float((i + 1) * B) for i in range(ITERATIONS)]
    # rollout/return_mean is the mean of the episodes the rollouts reported so far: 1, 1.5, 2, 2.5
    assert [r["rollout/return_mean"] for r in rows] == [1.0, 1.5, 2.0, 2.5]
    assert all(r["time/env_ms"] == 1.0 for r in rows)
    # learning-rate annealing follows the rollouts' budget_fraction
    assert [r["stats/lr"] for r in rows] == [0.01 * (1 - i / ITERATIONS) for i in range(ITERATIONS)]


def test_lightning_moves_a_rollout_to_the_learners_device_whole():
    # What Lightning does with the batch for an accelerator learner (transfer_batch_to_device): every tensor
    # moves, the rest is kept. The "meta" device stands in for a GPU on a CPU-only machine.
    from lightning.fabric.utilities.apply_func import move_data_to_device

    rollout = next(iter(OwnRollouts()))
    moved = move_data_to_device(rollout, torch.device("meta"))
    assert isinstance(moved, Rollout)
    for name in (*fields_with_role(SAMPLE), "minibatch_indices", "episode_returns", "episode_lengths"):
        assert getattr(moved, name).device.type == "meta", name
    assert (moved.timings, moved.env_steps, moved.final) == (rollout.timings, rollout.env_steps, rollout.final)
    assert rollout.obs.device.type == "cpu"  # the original is untouched

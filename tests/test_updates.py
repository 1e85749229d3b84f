"""The update loop inside one Lightning step per rollout: minibatch steps, the Trainer's gradient clipping,
learning-rate annealing and the target-KL early stop, through the real Trainer."""

import lightning as L
import pytest
import torch

from lit_ppo import PPODataModule, PPOModule
from lit_ppo.module import clip_grad_norm

ITERATIONS, EPOCHS, MINIBATCHES = 3, 2, 4


def _total_norm(module: L.LightningModule) -> float:
    return float(torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in module.parameters()
                                                       if p.grad is not None])))


class Recording(PPOModule):
    """Records, per optimizer step, the gradient norm before and after the module's clipping, and per rollout the
    learning rate its updates used."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.norms: list[tuple[float, float]] = []
        self.lrs: list[float] = []

    def training_step(self, batch, batch_idx):
        self.lrs.append(self.optimizers().param_groups[0]["lr"])
        return super().training_step(batch, batch_idx)

    def on_before_optimizer_step(self, optimizer):
        before = _total_norm(self)
        super().on_before_optimizer_step(optimizer)
        self.norms.append((before, _total_norm(self)))


def _fit(tmp_path, model_kwargs=None, **trainer_kwargs):
    torch.manual_seed(0)
    dm = PPODataModule("CartPole-v1", num_envs=4, num_steps=16, total_timesteps=64 * ITERATIONS,
                       update_epochs=EPOCHS, minibatch_size=64 // MINIBATCHES, seed=0)
    model = Recording(env_spec=dm.env_spec, hidden_sizes=[16], lr=0.01, **(model_kwargs or {}))
    trainer = L.Trainer(max_epochs=-1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=tmp_path, **trainer_kwargs)
    trainer.fit(model, dm)
    return model, trainer


def test_one_lightning_step_per_rollout_and_one_optimizer_step_per_minibatch(tmp_path):
    model, trainer = _fit(tmp_path)
    assert trainer.current_epoch == ITERATIONS
    assert trainer.global_step == len(model.norms) == ITERATIONS * EPOCHS * MINIBATCHES
    # linear annealing to 0 over the budget, one value per rollout
    assert model.lrs == pytest.approx([0.01 * (1 - i / ITERATIONS) for i in range(ITERATIONS)])


@pytest.mark.parametrize("clip", [0.05, 0.5])
def test_trainer_gradient_clip_val_clips_every_update(tmp_path, clip):
    model, trainer = _fit(tmp_path, gradient_clip_val=clip)
    assert all(after <= clip * (1 + 1e-4) for _, after in model.norms), model.norms
    clipped = [(before, after) for before, after in model.norms if before > clip]
    assert clipped, "no update needed clipping: the test would prove nothing"
    assert all(after == pytest.approx(clip, rel=1e-4) for _, after in clipped)
    assert trainer.gradient_clip_val == clip  # handed back to the Trainer after fit


def test_clipping_is_each_fits_trainer_setting_also_after_a_fit_raised(tmp_path):
    class FailsInSecondRollout(Recording):
        def training_step(self, batch, batch_idx):
            if self.current_epoch == 1:
                raise RuntimeError("simulated failure")
            return super().training_step(batch, batch_idx)

    def data():
        return PPODataModule("CartPole-v1", num_envs=4, num_steps=16, total_timesteps=64 * ITERATIONS,
                             minibatch_size=64, seed=0)

    dm = data()
    trainer = L.Trainer(max_epochs=-1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=tmp_path, gradient_clip_val=0.5)
    with pytest.raises(RuntimeError, match="simulated failure"):
        trainer.fit(FailsInSecondRollout(env_spec=dm.env_spec, hidden_sizes=[16]), dm)
    assert (trainer.gradient_clip_val, trainer.gradient_clip_algorithm) == (0.5, None)  # as it was given
    retry = Recording(env_spec=dm.env_spec, hidden_sizes=[16], lr=0.01)  # the same Trainer fits again, clipping
    trainer.fit(retry, data())
    assert retry.norms and all(after <= 0.5 * (1 + 1e-4) for _, after in retry.norms)
    retry.norms.clear()  # and a Trainer without clipping does not inherit it through the module
    L.Trainer(max_epochs=-1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False, default_root_dir=tmp_path).fit(retry, data())
    assert retry.norms and all(before == after for before, after in retry.norms)


def test_without_clipping_norms_are_untouched(tmp_path):
    model, _ = _fit(tmp_path)
    assert all(before == after for before, after in model.norms)
    assert max(before for before, _ in model.norms) > 0.05  # so the clipped runs above really clipped


def test_gradient_clipping_by_value(tmp_path):
    model, _ = _fit(tmp_path, gradient_clip_val=1e-3, gradient_clip_algorithm="value")
    assert all(p.grad.abs().max() <= 1e-3 for p in model.parameters() if p.grad is not None)


def test_target_kl_stops_a_rollouts_updates_early(tmp_path):
    # The first minibatch of a rollout is scored by the acting weights (KL exactly 0); after one update the
    # second minibatch's KL is positive, far above 1.5 * 1e-9, so each rollout stops after two steps.
    model, trainer = _fit(tmp_path, model_kwargs={"target_kl": 1e-9})
    assert trainer.global_step == 2 * ITERATIONS


class CountsBackward(L.Callback):
    def __init__(self):
        self.calls = 0

    def on_after_backward(self, trainer, pl_module):
        self.calls += 1


class CountsOptimizerSteps(CountsBackward):
    on_after_backward = L.Callback.on_after_backward  # this one hooks the optimizer step only

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        self.calls += 1


@pytest.mark.parametrize("counter", [CountsBackward, CountsOptimizerSteps])
def test_hooked_updates_take_lightnings_path_with_the_same_result(tmp_path, counter):
    # Without hooks around backward or the optimizer step, one process, full precision and no profiler, the loop
    # calls loss.backward(), the module's on_before_optimizer_step and the torch step itself (Lightning would only
    # add dispatch). A callback with such a hook gets Lightning's path: every hook runs, and the training is the same.
    plain, plain_trainer = _fit(tmp_path, gradient_clip_val=0.05)
    assert plain._plain_update and plain_trainer.global_step == ITERATIONS * EPOCHS * MINIBATCHES
    hooks = counter()
    hooked, trainer = _fit(tmp_path, gradient_clip_val=0.05, callbacks=[hooks])
    assert not hooked._plain_update and hooks.calls == trainer.global_step == ITERATIONS * EPOCHS * MINIBATCHES
    assert hooked.norms == plain.norms  # the same clipping, step for step
    for a, b in zip(plain.parameters(), hooked.parameters()):
        assert torch.equal(a, b)


def test_mixed_precision_and_profilers_take_lightnings_path(tmp_path):
    mixed, _ = _fit(tmp_path, precision="bf16-mixed")  # loss scaling / unscaling belong to the precision plugin
    assert not mixed._plain_update
    profiled, _ = _fit(tmp_path, profiler="simple")  # a profiler gets every hook it would time
    assert not profiled._plain_update


def test_clip_grad_norm_scales_by_max_norm_over_the_total_norm():
    a, b = torch.zeros(1, requires_grad=True), torch.zeros(1, requires_grad=True)
    a.grad, b.grad = torch.tensor([3.0]), torch.tensor([4.0])  # total norm 5
    clip_grad_norm([a, b], 1.0)
    assert (float(a.grad), float(b.grad)) == pytest.approx((0.6, 0.8), rel=1e-5)
    clip_grad_norm([a, b], 2.0)  # under the limit: unchanged
    assert (float(a.grad), float(b.grad)) == pytest.approx((0.6, 0.8), rel=1e-5)
    c = torch.zeros(2, requires_grad=True)  # a parameter without a gradient is skipped
    clip_grad_norm([a, c], 0.3)
    assert float(a.grad) == pytest.approx(0.3, rel=1e-5) and c.grad is None

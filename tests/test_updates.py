"""The update loop inside one Lightning step per rollout: minibatch steps, the Trainer's gradient clipping,
learning-rate annealing and the target-KL early stop, through the real Trainer."""

import lightning as L
import pytest
import torch

from lit_ppo import PPODataModule, PPOModule
from lit_ppo.errors import ConfigError
from lit_ppo.learning.learning_rate import adapted_lr
from lit_ppo.learning.losses import LOSS_NAMES

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

    def on_before_optimizer_step(self, optimizer):
        if self.global_step % (EPOCHS * MINIBATCHES) == 0:  # the first update of each rollout
            self.lrs.append(optimizer.param_groups[0]["lr"])
        before = _total_norm(self)
        super().on_before_optimizer_step(optimizer)
        self.norms.append((before, _total_norm(self)))


def _fit(tmp_path, model_kwargs=None, module_class=None, **trainer_kwargs):
    torch.manual_seed(0)
    dm = PPODataModule("CartPole-v1", num_envs=4, num_steps=16, total_timesteps=64 * ITERATIONS,
                       update_epochs=EPOCHS, minibatch_size=64 // MINIBATCHES, seed=0)
    model_kwargs = {"anneal_lr": True, **(model_kwargs or {})}
    model = (module_class or Recording)(env_spec=dm.env_spec, hidden_sizes=[16], lr=0.01, **model_kwargs)
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
def test_max_grad_norm_clips_every_update(tmp_path, clip):
    model, trainer = _fit(tmp_path, model_kwargs={"max_grad_norm": clip})
    assert all(after <= clip * (1 + 1e-4) for _, after in model.norms), model.norms
    clipped = [(before, after) for before, after in model.norms if before > clip]
    assert clipped, "no update needed clipping: the test would prove nothing"
    assert all(after == pytest.approx(clip, rel=1e-4) for _, after in clipped)
    # below the limit a gradient is left as it is
    assert all(before == pytest.approx(after, rel=1e-6) for before, after in model.norms if before <= clip)


def test_without_clipping_norms_are_untouched(tmp_path):
    model, _ = _fit(tmp_path, model_kwargs={"max_grad_norm": None})
    assert all(before == after for before, after in model.norms)
    assert max(before for before, _ in model.norms) > 0.05  # so the clipped runs above really clipped


def test_trainer_gradient_clip_val_is_refused_naming_the_model_setting(tmp_path):
    with pytest.raises(ConfigError, match=r"trainer.gradient_clip_val: .*model.max_grad_norm: 0.5"):
        _fit(tmp_path, gradient_clip_val=0.5)


class RecordsKL(Recording):
    """Records the approx KL of every minibatch the objective scores (before its update, if any is applied) and the
    optimizer steps of each rollout."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.kls: list[list[float]] = []  # per rollout, per minibatch scored
        self.steps: list[int] = []  # per rollout
        objective = self.objective
        kl_index = LOSS_NAMES.index("stats/approx_kl")

        class Scored:
            prepare = staticmethod(objective.prepare)

            def __call__(_, minibatch, clip_coef):
                loss, terms = objective(minibatch, clip_coef)
                self.kls[-1].append(float(terms[kl_index]))
                return loss, terms

        self.objective = Scored()

    def training_step(self, rollout, batch_idx):
        self.kls.append([])
        before = self.global_step
        super().training_step(rollout, batch_idx)
        self.steps.append(self.global_step - before)


@pytest.mark.parametrize("target_kl", [1e-9, 2e-3, 1e-2])
def test_target_kl_applies_the_updates_sb3s_rule_applies(tmp_path, target_kl):
    # SB3's rule (ppo.py, train()): the minibatch's approx KL under the current weights is computed before its step;
    # above 1.5 * target_kl that update is not applied and the rollout's remaining updates are skipped.
    model, trainer = _fit(tmp_path, model_kwargs={"target_kl": target_kl}, module_class=RecordsKL)
    expected = []
    for kls in model.kls:
        over = [i for i, kl in enumerate(kls) if kl > 1.5 * target_kl]
        assert not over or over[0] == len(kls) - 1  # nothing was scored after the stop
        expected.append(over[0] if over else EPOCHS * MINIBATCHES)
    assert model.steps == expected, (model.kls, model.steps)
    assert trainer.global_step == sum(expected)
    assert model.kls[0][0] == 0.0  # the first minibatch is scored by the acting weights
    if target_kl == 1e-9:  # any update moves the policy: exactly one applied per rollout
        assert expected == [1] * ITERATIONS
    if target_kl == 2e-3:  # the rule fires mid-rollout, where a running mean or a check after the step differ
        assert any(1 < n < EPOCHS * MINIBATCHES for n in expected), model.kls
    if target_kl == 1e-2:
        assert EPOCHS * MINIBATCHES in expected, model.kls  # a rollout whose KL stayed under the threshold


class CountsHooks(L.Callback):
    """Counts Lightning's hooks around each update: all of them run, once per optimizer step."""

    def __init__(self):
        self.calls = {"on_before_backward": 0, "on_after_backward": 0, "on_before_optimizer_step": 0}

    def on_before_backward(self, trainer, pl_module, loss):
        self.calls["on_before_backward"] += 1

    def on_after_backward(self, trainer, pl_module):
        self.calls["on_after_backward"] += 1

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        self.calls["on_before_optimizer_step"] += 1


def test_every_update_goes_through_lightnings_hooks(tmp_path):
    hooks = CountsHooks()
    _, trainer = _fit(tmp_path, callbacks=[hooks])
    assert trainer.global_step == ITERATIONS * EPOCHS * MINIBATCHES
    assert hooks.calls == dict.fromkeys(hooks.calls, trainer.global_step)


def test_bf16_mixed_updates_clip_and_stay_finite(tmp_path):
    model, trainer = _fit(tmp_path, model_kwargs={"max_grad_norm": 0.05}, precision="bf16-mixed")
    assert trainer.global_step == ITERATIONS * EPOCHS * MINIBATCHES
    assert all(after <= 0.05 * (1 + 1e-3) for _, after in model.norms)
    assert all(torch.isfinite(p).all() for p in model.parameters())


@pytest.mark.parametrize("mode", [True, "reduce-overhead"])  # on a GPU the second also captures CUDA graphs
def test_compiled_updates_match_eager_ones(tmp_path, mode):
    # model.compile runs the minibatch objective (forward, loss, its backward) through torch.compile: the same
    # arithmetic in fused kernels, so the parameters after every update of 3 rollouts agree to float tolerance.
    eager, _ = _fit(tmp_path / "eager", model_kwargs={"max_grad_norm": 0.5})
    compiled, trainer = _fit(tmp_path / "compiled", model_kwargs={"max_grad_norm": 0.5, "compile": mode})
    assert compiled.objective.compiled is not None  # it did not fall back to eager
    assert trainer.global_step == ITERATIONS * EPOCHS * MINIBATCHES
    for (name, a), b in zip(eager.named_parameters(), compiled.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)
    assert [n for n, _ in eager.norms] == pytest.approx([n for n, _ in compiled.norms], rel=1e-3)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (scripts/gpu_check.sh)")
@pytest.mark.parametrize("mode", [True, "reduce-overhead"])  # reduce-overhead: CUDA graphs
@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_compiled_updates_match_eager_ones_on_cuda(tmp_path, mode, precision):
    kwargs = dict(accelerator="gpu", devices=1, precision=precision)
    eager, _ = _fit(tmp_path / "eager", model_kwargs={"max_grad_norm": 0.5}, **kwargs)
    compiled, _ = _fit(tmp_path / "compiled", model_kwargs={"max_grad_norm": 0.5, "compile": mode}, **kwargs)
    assert compiled.objective.compiled is not None
    tolerance = dict(rtol=1e-4, atol=1e-5) if precision == "32-true" else dict(rtol=2e-2, atol=2e-3)
    for (name, a), b in zip(eager.named_parameters(), compiled.parameters()):
        torch.testing.assert_close(a, b, msg=name, **tolerance)


def test_only_the_first_compiled_call_may_fall_back_to_eager():
    # A failure while compiling (the first call) falls back with a warning; after a compiled call has run, an
    # error is the training's own and must be raised, with compile left on.
    import warnings

    from lit_ppo.networks.actor_critic import ActorCritic
    from lit_ppo.collection.rollout import Minibatch
    from lit_ppo.learning.objective import PPOObjective
    from lit_ppo.envs.spaces import spec_from_dict

    spec = PPODataModule("CartPole-v1", num_envs=1, num_steps=8, minibatch_size=8).env_spec
    policy = ActorCritic(spec_from_dict(spec["observation"]), spec_from_dict(spec["action"]), [8])
    objective = PPOObjective(policy, 0.5, 0.0, compile=True)
    n = 8
    good = Minibatch(torch.randn(n, 4), torch.zeros(n, dtype=torch.long), torch.zeros(n), torch.zeros(n),
                     torch.randn(n), torch.zeros(n))
    loss, _ = objective(good, 0.2)
    assert objective.compiled is not None and torch.isfinite(loss)
    bad = good._replace(obs=torch.randn(n, 5))  # the wrong observation width: a genuine error in training
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no "torch.compile failed ... eagerly" warning
        with pytest.raises(Exception, match=r"5|shape|size"):
            objective(bad, 0.2)
    assert objective.compiled is not None


class RecordsRates(RecordsKL):
    """Also records the learning rate of every optimizer step."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.step_lrs: list[float] = []

    def on_before_optimizer_step(self, optimizer):
        self.step_lrs.append(optimizer.param_groups[0]["lr"])
        super().on_before_optimizer_step(optimizer)


def test_the_adaptive_rule_by_hand():
    assert adapted_lr(3e-4, 0.021, 0.01) == pytest.approx(2e-4)  # above twice the target: / 1.5
    assert adapted_lr(3e-4, 0.004, 0.01) == pytest.approx(4.5e-4)  # below half of it: x 1.5
    assert adapted_lr(3e-4, 0.02, 0.01) == adapted_lr(3e-4, 0.005, 0.01) == adapted_lr(3e-4, 0.0, 0.01) == 3e-4
    assert adapted_lr(1.2e-5, 1.0, 0.01) == 1e-5 and adapted_lr(8e-3, 1e-9, 0.01) == 1e-2  # rsl_rl's bounds


@pytest.mark.parametrize("target", [1e-4, 3e-3])
def test_adaptive_lr_kl_sets_each_steps_rate_from_its_minibatchs_kl_across_rollouts(tmp_path, target):
    model, trainer = _fit(tmp_path, model_kwargs={"adaptive_lr_kl": target, "anneal_lr": False, "target_kl": None},
                          module_class=RecordsRates)
    kls = [kl for rollout in model.kls for kl in rollout]
    assert len(kls) == len(model.step_lrs) == ITERATIONS * EPOCHS * MINIBATCHES  # no stop: every update applied
    expected, lr = [], 0.01  # _fit's lr: where the rate starts; it carries over from rollout to rollout
    for kl in kls:
        lr = max(1e-5, lr / 1.5) if kl > 2 * target else min(1e-2, lr * 1.5) if 0 < kl < target / 2 else lr
        expected.append(lr)
    assert model.step_lrs == pytest.approx(expected, rel=1e-12)
    steps = list(zip([0.01] + model.step_lrs, model.step_lrs))
    assert any(b < a for a, b in steps), (kls, model.step_lrs)  # the rule fell ...
    if target == 1e-4:  # ... and rose (the next rollout's first minibatches, scored near the acting weights)
        assert any(b > a for a, b in steps), (kls, model.step_lrs)


def test_adaptive_lr_kl_with_anneal_lr_is_refused_naming_both(tmp_path):
    with pytest.raises(ConfigError, match=r"model.adaptive_lr_kl: and model.anneal_lr both set the learning rate"):
        _fit(tmp_path, model_kwargs={"adaptive_lr_kl": 0.01})  # _fit anneals


def test_an_adapted_rate_resumes_from_the_checkpoint_not_from_model_lr(tmp_path):
    from lightning.pytorch.callbacks import ModelCheckpoint

    kwargs = {"adaptive_lr_kl": 1e-4, "anneal_lr": False, "target_kl": None}
    runs = []
    for iterations, ckpt_path in ((ITERATIONS, None), (ITERATIONS + 1, tmp_path / "last.ckpt")):
        torch.manual_seed(0)
        dm = PPODataModule("CartPole-v1", num_envs=4, num_steps=16, total_timesteps=64 * iterations,
                           update_epochs=EPOCHS, minibatch_size=64 // MINIBATCHES, seed=0)
        model = RecordsRates(env_spec=dm.env_spec, hidden_sizes=[16], lr=0.01, **kwargs)
        L.Trainer(max_epochs=-1, logger=False, callbacks=[ModelCheckpoint(dirpath=tmp_path, save_last=True)],
                  enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path,
                  ).fit(model, dm, ckpt_path=ckpt_path)
        runs.append(model)
    first, resumed = runs
    assert first.step_lrs[-1] != 0.01  # what the resumed fit must not start from
    assert len(resumed.step_lrs) == EPOCHS * MINIBATCHES  # the one rollout left
    assert resumed.step_lrs[0] == adapted_lr(first.step_lrs[-1], resumed.kls[0][0], 1e-4)


@pytest.mark.parametrize("target", [1e-4, 1.0])
def test_adaptive_lr_every_rollout_sets_the_next_rollouts_rate_from_its_last_kl(tmp_path, target):
    kwargs = {"adaptive_lr_kl": target, "adaptive_lr_every": "rollout", "anneal_lr": False, "target_kl": None}
    model, _ = _fit(tmp_path, model_kwargs=kwargs, module_class=RecordsRates)
    per_rollout = EPOCHS * MINIBATCHES
    rates = [model.step_lrs[i:i + per_rollout] for i in range(0, len(model.step_lrs), per_rollout)]
    assert len(rates) == ITERATIONS and all(len(set(r)) == 1 for r in rates)  # one rate a rollout
    expected = [0.01]
    for kls in model.kls[:-1]:
        expected.append(adapted_lr(expected[-1], kls[-1], target))
    assert [r[0] for r in rates] == expected
    # this small policy at lr 0.01 passes 2e-4 every rollout (the rate falls), never 0.5 (it rises)
    assert expected == ([0.01 / 1.5 ** i for i in range(ITERATIONS)] if target == 1e-4 else
                        [min(0.01 * 1.5 ** i, 1e-2) for i in range(ITERATIONS)]), model.kls


def test_adaptive_lr_every_is_checked():
    from lit_ppo.learning.settings import PPOSettings

    with pytest.raises(ConfigError, match=r"model.adaptive_lr_every: must be one of \('minibatch', 'rollout'\)"):
        PPOSettings.parse(adaptive_lr_kl=0.01, adaptive_lr_every="epoch")

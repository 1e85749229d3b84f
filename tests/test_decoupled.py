"""Decoupled PPO for overlapped rollouts (lit_ppo/learning/decoupled.py): the clip is centred on the learner's policy at the
update's start and each sample's surrogate is weighted by its ratio to the behaviour policy that acted."""

import math

import lightning as L
import pytest
import torch

from lit_ppo.learning.decoupled import decouple, lag_kl
from lit_ppo.learning.losses import ppo_loss_terms
from lit_ppo.networks.actor_critic import ActorCritic
from lit_ppo.learning.objective import PPOObjective
from tests.test_overlap import Versions, fit


def three_samples(importance_weights: list[float]) -> dict:
    """Ratios 0.5, 1, 1.5 to the proximal policy, advantages 1, -1, 2, clip 0.2: per sample
    max(-A r, -A clip(r, .8, 1.2)) = -.5, 1, -2.4 before the importance weights."""
    return dict(new_logprob=torch.tensor([0.5, 1.0, 1.5]).log() - 1.0, old_logprob=torch.full((3,), -1.0),
                advantages=torch.tensor([1.0, -1.0, 2.0]), entropy=torch.zeros(3), new_values=torch.zeros(3),
                old_values=torch.zeros(3), returns=torch.zeros(3), clip_coef=0.2,
                importance_weights=torch.tensor(importance_weights))


def test_importance_weights_scale_each_samples_clipped_surrogate_against_hand_computed_values():
    t = ppo_loss_terms(**three_samples([2.0, 0.5, 1.0]))
    # per sample max(-A r, -A clip(r, .8, 1.2)) = -.5, 1, -2.4, times 2, .5, 1
    assert t.policy.item() == pytest.approx((-1.0 + 0.5 - 2.4) / 3, abs=1e-6)
    # the diagnostics measure the ratio to the proximal policy, unweighted
    assert t.clip_fraction.item() == pytest.approx(2 / 3, abs=1e-6)
    assert t.approx_kl.item() == pytest.approx(((-0.5 - math.log(0.5)) + (0.5 - math.log(1.5))) / 3, abs=1e-6)


def test_an_overlapped_update_starts_unclipped_around_the_learners_policy_and_weighs_by_the_lag(no_child_left):
    versions = Versions()
    model, _ = fit(iterations=4, callbacks=[versions], model_kwargs={"decoupled": True})
    policy = ActorCritic.from_env_spec(model.hparams.env_spec)
    objective = PPOObjective(policy, vf_coef=0.5, ent_coef=0.0)
    for j, rollout in enumerate(versions.rollouts):
        policy.load_state_dict(versions.weights[j])  # the learner's weights as rollout j's update starts
        decoupled = decouple(policy, rollout)
        with torch.no_grad():
            proximal, _, values = policy.evaluate(rollout.obs, rollout.actions)
        torch.testing.assert_close(decoupled.logprobs, proximal, rtol=0, atol=1e-6)
        torch.testing.assert_close(decoupled.values, values, rtol=0, atol=1e-6)
        torch.testing.assert_close(decoupled.importance_weights, (proximal - rollout.logprobs).exp(), rtol=1e-6, atol=0)
        # before its first step, no sample is clipped and the KL to the clip's centre is 0 ...
        _, terms = objective(PPOObjective.prepare(decoupled.minibatch(decoupled.minibatch_indices[0, 0]), True), 0.2)
        assert terms[3].item() == pytest.approx(0.0, abs=1e-6) and terms[4].item() == 0.0
        if j >= 2:  # ... while around the behaviour policy one update behind (Cleanba's) it already is not
            _, cleanba = objective(PPOObjective.prepare(rollout.minibatch(rollout.minibatch_indices[0, 0]), True), 0.2)
            assert cleanba[3].item() > 1e-4
            assert lag_kl(decoupled) > 1e-4
        if j == 0:  # collected and learned with the same initial weights: nothing to correct
            assert lag_kl(decoupled) == pytest.approx(0.0, abs=1e-9)
    assert model.rollout_metrics["stats/lag_kl"] > 0


def test_decoupling_is_off_by_default(no_child_left):
    model, _ = fit(iterations=2, model_kwargs={"target_kl": None})  # overlapped: Cleanba's clip unless asked
    assert "stats/lag_kl" not in model.rollout_metrics  # and without a KL stop, no proximal pass at all


def test_the_kl_measures_from_the_learners_policy_where_the_clip_is_around_an_older_one():
    args = three_samples([1.0, 1.0, 1.0])
    del args["importance_weights"]  # Cleanba's clip: around the acting policy, ratios .5, 1, 1.5
    # the learner's policy at the update's start is the new one: KL 0, whatever the acting policy's lag
    t = ppo_loss_terms(**args, kl_logprob=args["new_logprob"].clone())
    assert t.approx_kl.item() == 0.0 and t.clip_fraction.item() == pytest.approx(2 / 3, abs=1e-6)
    # twice as likely at the start (log 2 - 1): ratios .25, .5, .75 to it
    t = ppo_loss_terms(**args, kl_logprob=torch.full((3,), math.log(2.0) - 1.0))
    assert t.approx_kl.item() == pytest.approx(sum(r - 1 - math.log(r) for r in (0.25, 0.5, 0.75)) / 3, abs=1e-6)
    assert ppo_loss_terms(**args).approx_kl.item() == pytest.approx(  # without it: from the acting policy
        ((-0.5 - math.log(0.5)) + (0.5 - math.log(1.5))) / 3, abs=1e-6)


class StepsPerRollout(L.Callback):
    def __init__(self) -> None:
        self.steps, self.before = [], 0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.before = trainer.global_step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.steps.append(trainer.global_step - self.before)


def test_the_kl_stop_under_cleanbas_clip_measures_each_update_not_the_acting_policys_lag(no_child_left):
    # A stop so tight that any step passes it: a synchronous rollout applies exactly one update (test_updates.py).
    # Measured from the policy that acted, one version behind, the lag alone would pass it before the first update
    # of every rollout after the first, which would then apply none.
    counted = StepsPerRollout()
    model, _ = fit(iterations=4, callbacks=[counted], model_kwargs={"target_kl": 1e-9})
    assert counted.steps == [1, 1, 1, 1]
    assert model.rollout_metrics["stats/lag_kl"] > 0  # the acting policy was behind the learner's


def test_decoupled_setting_leaves_a_synchronous_fit_bit_identical():
    # a synchronous rollout was acted by the learner's own weights: nothing to decouple. What lets halfcheetah.yaml
    # set it for overlapped runs and keep its synchronous results.
    plain, _ = fit(iterations=3, overlap=False)
    decoupled, _ = fit(iterations=3, overlap=False, model_kwargs={"decoupled": True})
    assert "stats/lag_kl" not in decoupled.rollout_metrics
    for (name, a), b in zip(plain.policy.state_dict().items(), decoupled.policy.state_dict().values()):
        assert torch.equal(a, b), name


def test_importance_weights_above_the_bound_count_as_the_bound_against_hand_computed_values():
    args = three_samples([4.0, 0.5, 2.5])
    # per sample -.5, 1, -2.4 (three_samples); the weights 4 and 2.5 count as 2
    assert ppo_loss_terms(**args, max_importance_weight=2.0).policy.item() == pytest.approx(
        (-0.5 * 2 + 1 * 0.5 - 2.4 * 2) / 3, abs=1e-6)
    assert ppo_loss_terms(**args).policy.item() == pytest.approx((-0.5 * 4 + 1 * 0.5 - 2.4 * 2.5) / 3, abs=1e-6)


def test_an_overlapped_decoupled_fit_logs_the_share_of_truncated_weights(no_child_left):
    model, _ = fit(iterations=4, model_kwargs={"decoupled": True})
    assert model.objective.max_importance_weight == 2.0  # the default bound reaches the surrogate
    share = model.rollout_metrics["stats/truncated_weights"]
    assert 0.0 <= share < 0.05  # one update of lag: the bound acts on the tail only
    unbounded, _ = fit(iterations=2, model_kwargs={"decoupled": True, "decoupled_max_weight": None})
    assert unbounded.objective.max_importance_weight is None and "stats/truncated_weights" not in unbounded.rollout_metrics


def test_a_bound_below_1_is_refused_naming_the_key():
    from lit_ppo.errors import ConfigError
    from lit_ppo.learning.settings import PPOSettings

    with pytest.raises(ConfigError, match="model.decoupled_max_weight: must be >= 1"):
        PPOSettings.parse(decoupled=True, decoupled_max_weight=0.5)

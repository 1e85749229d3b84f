"""Where and how the rollout's policy acts: the CPU copy, the learner-device actor and the placement an
:class:`lit_ppo.collection.acting.PolicyPlacement` gives, exercised on the CPU (the CPU-copy path of an accelerator learner where CUDA
is available)."""

import pytest
import torch

from lit_ppo import PPODataModule, PPOModule
from lit_ppo.collection.acting import PolicyPlacement, LearnerDevicePolicy, cpu_copy
from lit_ppo.errors import ConfigError


def _module():
    dm = PPODataModule("CartPole-v1")
    torch.manual_seed(0)
    return PPOModule(env_spec=dm.env_spec)


def test_device_actor_samples_the_same_actions_as_the_policy_with_the_same_generator():
    module = _module()
    obs = torch.randn(16, 4)
    a = module.policy.act(obs, torch.Generator().manual_seed(3))
    b = LearnerDevicePolicy(module.policy).act(obs, torch.Generator().manual_seed(3))
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y)
    assert torch.equal(LearnerDevicePolicy(module.policy).act(obs, deterministic=True)[0],
                       module.policy.act(obs, deterministic=True)[0])


def test_cpu_copy_tracks_the_latest_weights():
    module = _module()
    copy = cpu_copy(module.policy, None)
    with torch.no_grad():
        module.policy.critic[-1].bias.fill_(3.0)
    assert copy.critic[-1].bias.item() == 0.0
    assert cpu_copy(module.policy, copy) is copy and copy.critic[-1].bias.item() == 3.0


@pytest.mark.parametrize("placement", ["cpu", "auto", "learner"])
def test_on_a_cpu_learner_the_actor_acts_with_the_policy_itself(placement):
    # Nothing to copy or measure: the learner's network is already where the environments step.
    module = _module()
    keys = set(module.state_dict())
    actor = PolicyPlacement(module.policy, placement)
    assert actor.for_rollout(torch.randn(8, 4)) is module.policy
    assert actor.for_evaluation() is module.policy
    assert actor.copy is None and actor.take_measurements() == {}
    assert set(module.state_dict()) == keys


def test_the_data_module_acts_with_the_policy_it_is_given():
    dm = PPODataModule("CartPole-v1", num_envs=2, num_steps=8, minibatch_size=8, eval_episodes=2, seed=0)
    with pytest.raises(ConfigError, match="no policy to act with.*set_policy"):
        dm.val_dataloader()
    module = PPOModule(env_spec=dm.env_spec)
    dm.set_policy(module.policy, "auto")
    assert dm.placement.policy is module.policy and dm.placement.choice == "auto"


def test_impossible_placements_are_named():
    module = _module()
    with pytest.raises(ConfigError, match="model.actor_device.*'gpu'"):
        PolicyPlacement(module.policy, "gpu")
    actor = PolicyPlacement(module.policy, "cuda")  # needs a CUDA learner; this one is on the CPU
    with pytest.raises(ConfigError, match="model.actor_device: 'cuda' needs a CUDA learner"):
        actor.for_rollout(torch.randn(2, 4))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA learner")
def test_the_cpu_acting_copy_of_an_accelerator_learner_is_not_a_submodule():
    # With the learner on an accelerator the PolicyPlacement keeps a CPU copy; it must stay out of the module's state_dict
    # (and so out of checkpoints, which would then not load into a fresh module).
    module = _module().cuda()
    keys = set(module.state_dict())
    actor = PolicyPlacement(module.policy, "cpu")
    acting = actor.for_rollout(torch.randn(8, 4))
    assert acting is not module.policy and next(acting.parameters()).device.type == "cpu"
    assert set(module.state_dict()) == keys
    with torch.no_grad():
        module.policy.critic[-1].bias.fill_(3.0)
    assert actor.for_rollout(torch.randn(8, 4)) is acting and acting.critic[-1].bias.item() == 3.0
    assert actor.for_evaluation() is acting

"""Where and how the rollout's policy acts: the CPU copy, the learner-device actor and the fused actor-critic,
exercised on the CPU."""

import pytest
import torch

from lit_ppo import PPODataModule, PPOModule
from lit_ppo.acting import DeviceActor, FusedActing, choose_actor_device, cpu_copy
from lit_ppo.networks import ActorCritic


def _module():
    dm = PPODataModule("CartPole-v1")
    torch.manual_seed(0)
    return PPOModule(env_spec=dm.env_spec)


def test_device_actor_samples_the_same_actions_as_the_policy_with_the_same_generator():
    module = _module()
    obs = torch.randn(16, 4)
    a = module.policy.act(obs, torch.Generator().manual_seed(3))
    b = DeviceActor(module.policy, torch.device("cpu")).act(obs, torch.Generator().manual_seed(3))
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y)
    assert torch.equal(DeviceActor(module.policy, torch.device("cpu")).act(obs, deterministic=True)[0],
                       module.policy.act(obs, deterministic=True)[0])


def test_cpu_copy_tracks_the_latest_weights():
    module = _module()
    copy = cpu_copy(module.policy, None)
    with torch.no_grad():
        module.policy.critic[-1].bias.fill_(3.0)
    assert copy.critic[-1].bias.item() == 0.0
    assert cpu_copy(module.policy, copy) is copy and copy.critic[-1].bias.item() == 3.0


def test_the_cpu_acting_copy_is_not_a_submodule(monkeypatch):
    # With the learner on an accelerator the module keeps a CPU copy; it must stay out of state_dict (and so out
    # of checkpoints, which would then not load into a fresh module).
    module = _module()
    keys = set(module.state_dict())
    monkeypatch.setattr(PPOModule, "device", property(lambda self: torch.device("meta")))
    module._act_on = "cpu"
    actor = module.acting_policy()
    assert actor.policy is not module.policy and next(actor.policy.parameters()).device.type == "cpu"
    assert set(module.state_dict()) == keys


def test_choose_actor_device_reports_both_timings():
    module = _module()
    choice, cpu_s, device_s = choose_actor_device(module.policy, torch.device("cpu"), torch.randn(8, 4))
    assert choice in ("cpu", "learner") and cpu_s > 0 and device_s > 0


SPACES = {
    "discrete": ({"type": "box", "shape": [4], "dtype": "float32", "image": False}, {"type": "discrete", "n": 3}),
    "box": ({"type": "box", "shape": [5], "dtype": "float32", "image": False}, {"type": "box", "shape": [2]}),
    "image": ({"type": "box", "shape": [36, 36, 1], "dtype": "uint8", "image": True, "channels_last": True},
              {"type": "discrete", "n": 4}),
}


@pytest.mark.parametrize("space", sorted(SPACES))
@pytest.mark.parametrize("batch", [1, 8, FusedActing.MAX_BATCH + 1])
def test_fused_acting_acts_as_the_policy(space, batch):
    torch.manual_seed(0)
    observation, action = SPACES[space]
    policy = ActorCritic(observation, action, [32, 16])
    with torch.no_grad():  # non-trivial weights everywhere (the output layers start near zero)
        for p in policy.parameters():
            p.add_(0.3 * torch.randn_like(p))
    shape = observation["shape"]
    obs = torch.randint(0, 256, (batch, *shape), dtype=torch.uint8) if space == "image" else torch.randn(batch, *shape)
    fused = FusedActing(policy)
    with torch.inference_mode():
        expected = policy.act(obs, torch.Generator().manual_seed(5))
        got = fused.act(obs, torch.Generator().manual_seed(5))
        torch.testing.assert_close(got[0], expected[0])  # same samples from the same generator
        torch.testing.assert_close(got[1], expected[1], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(got[2], expected[2], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(fused.act(obs, deterministic=True)[0], policy.act(obs, deterministic=True)[0])
        torch.testing.assert_close(fused.value(obs), policy.value(obs))

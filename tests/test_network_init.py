"""The policy's initialization settings the published RL-Zoo configs use: ``model.log_std_init`` (the Gaussian's
initial log-std) and ``model.ortho_init`` (PPO's orthogonal init, or PyTorch's default), against hand-computed
values."""

import math

import pytest
import torch
from torch import nn

from lit_ppo.errors import ConfigError
from lit_ppo.networks.actor_critic import ActorCritic
from lit_ppo.envs.spaces import BoxSpec, DiscreteSpec

OBS, ACTION = BoxSpec((4,)), BoxSpec((2,))


def linears(net: ActorCritic) -> list[nn.Linear]:
    return [m for m in net.modules() if isinstance(m, nn.Linear)]


def test_log_std_init_sets_the_initial_std_and_entropy():
    net = ActorCritic(OBS, ACTION, [8], log_std_init=-2.0)
    params, _, _ = net(torch.zeros(3, 4))
    mean, log_std = params.chunk(2, dim=-1)
    # exp(-2) = 0.1353352832...; a Gaussian's entropy per dimension is log_std + 0.5 * (1 + ln 2 pi)
    torch.testing.assert_close(log_std.exp(), torch.full((3, 2), 0.1353352832))
    _, entropy, _ = net.evaluate(torch.zeros(3, 4), torch.zeros(3, 2))
    torch.testing.assert_close(entropy, torch.full((3,), 2 * (-2.0 + 1.4189385332)))
    assert list(ActorCritic(OBS, ACTION, [8]).log_std.tolist()) == [-0.5, -0.5]  # the default: std 0.61


def test_ortho_init_false_keeps_pytorchs_default_init():
    torch.manual_seed(0)
    net = ActorCritic(OBS, ACTION, [64, 64], ortho_init=False)
    for layer in linears(net):
        bound = 1 / math.sqrt(layer.in_features)  # nn.Linear's default: weights and biases uniform in +-1/sqrt(fan_in)
        assert layer.weight.abs().max() <= bound and layer.bias.abs().max() <= bound
        assert torch.count_nonzero(layer.bias) == layer.bias.numel()  # orthogonal init zeroes them
    # uniform(-1/8, 1/8) has std 1/(8 sqrt 3) = 0.0722; orthogonal with gain sqrt(2) on 64 x 64 would be 0.177
    assert net.actor[2].weight.std().item() == pytest.approx(0.0722, rel=0.05)
    # the policy output is not scaled down to gain 0.01 (whose largest weight would be ~0.01)
    assert net.actor[-1].weight.abs().max().item() > 0.05
    ortho = ActorCritic(OBS, ACTION, [64, 64])
    assert ortho.actor[2].weight.std().item() == pytest.approx(math.sqrt(2) / 8, rel=0.02)


def test_ortho_init_false_leaves_a_users_network_alone():
    torch.manual_seed(0)
    net = ActorCritic(OBS, DiscreteSpec(3), network="torch.nn.Flatten", ortho_init=False)
    assert isinstance(net.encoder.net, nn.Flatten)
    assert torch.count_nonzero(net.actor[-1].bias) == 3  # the heads are built here: PyTorch's init


@pytest.mark.parametrize("kwargs, message", [
    ({"log_std_init": float("nan")}, "model.log_std_init: must be a finite number"),
    ({"log_std_init": float("inf")}, "model.log_std_init: must be a finite number"),
    ({"log_std_init": "low"}, "model.log_std_init: must be a finite number"),
    ({"ortho_init": "yes"}, "model.ortho_init: must be true (orthogonal init) or false"),
    ({"hidden_sizes": [64, 0]}, "model.hidden_sizes: must be positive layer widths"),
])
def test_bad_init_settings_are_named(kwargs, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        ActorCritic(OBS, ACTION, **{"hidden_sizes": [8], **kwargs})


def test_ortho_init_false_resets_the_recurrent_core_to_pytorch_s_init_too():
    import torch
    from torch import nn

    from lit_ppo.networks.actor_critic import ActorCritic
    from lit_ppo.envs.spaces import action_spec, observation_spec, spec_to_dict
    import gymnasium as gym
    import numpy as np

    env_spec = {"env_id": "x", "observation": spec_to_dict(observation_spec(gym.spaces.Box(-1, 1, (3,), np.float32))),
                "action": spec_to_dict(action_spec(gym.spaces.Discrete(2)))}
    torch.manual_seed(0)
    net = ActorCritic.from_env_spec(env_spec, recurrent={"hidden_size": 16}, ortho_init=False)
    bias = net.core.cell.bias_ih_l0
    assert bias.abs().sum() > 0 and bias.abs().max() <= 1 / 16 ** 0.5  # nn.LSTM's U(-1/sqrt(h), 1/sqrt(h)), not 0
    assert isinstance(net.core.cell, nn.LSTM)

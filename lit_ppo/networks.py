"""The actor-critic: two MLPs (actor and critic) and a distribution head chosen by the action space.

Heads compute sampling, log-probabilities and entropy directly on tensors, without
``torch.distributions`` objects: building one per acting step cost more than CartPole itself.
"""

import math
from collections.abc import Sequence
from typing import Any, Optional

import torch
from torch import Tensor, nn


def layer_init(layer: nn.Linear, gain: float) -> nn.Linear:
    """Orthogonal weights and zero biases, the initialization PPO's reference results depend on."""
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


def mlp(in_features: int, hidden_sizes: Sequence[int], out_features: int, out_gain: float) -> nn.Sequential:
    layers: list[nn.Module] = []
    for size in hidden_sizes:
        layers += [layer_init(nn.Linear(in_features, size), math.sqrt(2)), nn.Tanh()]
        in_features = size
    layers.append(layer_init(nn.Linear(in_features, out_features), out_gain))
    return nn.Sequential(*layers)


class CategoricalHead:
    """A categorical distribution over ``n`` actions, parameterized by logits."""

    def __init__(self, n: int) -> None:
        self.num_outputs = n
        self.action_shape: tuple[int, ...] = ()
        self.action_dtype = torch.long

    def sample(self, logits: Tensor, generator: Optional[torch.Generator] = None) -> Tensor:
        # argmax(p / E) with E ~ Exp(1) is an exact categorical sample (the exponential race).
        probs = logits.softmax(-1)
        race = torch.empty_like(probs).exponential_(generator=generator)
        return (probs / race).argmax(-1)

    def mode(self, logits: Tensor) -> Tensor:
        return logits.argmax(-1)

    def log_prob(self, logits: Tensor, actions: Tensor) -> Tensor:
        return logits.log_softmax(-1).gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)

    def entropy(self, logits: Tensor) -> Tensor:
        log_probs = logits.log_softmax(-1)
        return -(log_probs.exp() * log_probs).sum(-1)


def make_head(action_spec: dict[str, Any]):
    """The distribution head for an action-space description made by :func:`lit_ppo.envs.describe_spaces`."""
    kind = action_spec["type"]
    if kind == "discrete":
        return CategoricalHead(int(action_spec["n"]))
    raise ValueError(f"no distribution head for action space type {kind!r}")


class ActorCritic(nn.Module):
    """Separate actor and critic MLPs (tanh), orthogonally initialized: gain sqrt(2) hidden, 0.01 policy, 1 value."""

    def __init__(self, observation_shape: Sequence[int], action_spec: dict[str, Any], hidden_sizes: Sequence[int]):
        super().__init__()
        self.head = make_head(action_spec)
        obs_dim = math.prod(observation_shape)
        self.actor = mlp(obs_dim, hidden_sizes, self.head.num_outputs, out_gain=0.01)
        self.critic = mlp(obs_dim, hidden_sizes, 1, out_gain=1.0)

    def forward(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """Distribution parameters and values, both cast to fp32 (autocast may have made them half precision)."""
        obs = obs.flatten(1).float()
        return self.actor(obs).float(), self.critic(obs).squeeze(-1).float()

    def value(self, obs: Tensor) -> Tensor:
        return self.critic(obs.flatten(1).float()).squeeze(-1).float()

    def act(
        self, obs: Tensor, generator: Optional[torch.Generator] = None, deterministic: bool = False
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Action, its log-probability and the state value for a batch of observations."""
        params, value = self(obs)
        action = self.head.mode(params) if deterministic else self.head.sample(params, generator)
        return action, self.head.log_prob(params, action), value

    def evaluate(self, obs: Tensor, actions: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Log-probability of ``actions``, entropy and value under the current parameters (fp32)."""
        params, value = self(obs)
        return self.head.log_prob(params, actions), self.head.entropy(params), value

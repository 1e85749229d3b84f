"""A user's own network, as a README reader would write one: imported by class path from a config."""

from torch import nn


class Torso(nn.Module):
    """Two ReLU layers; ``LazyLinear`` learns the observation size from the first batch."""

    def __init__(self, width: int = 64):
        super().__init__()
        self.layers = nn.Sequential(nn.LazyLinear(width), nn.ReLU(), nn.Linear(width, width), nn.ReLU())

    def forward(self, obs):
        return self.layers(obs.float())


class NotAModule:
    def __init__(self, width: int = 64):
        self.width = width

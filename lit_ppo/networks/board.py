"""A small convolutional trunk over a board game's grid, for ``model.network`` (e.g. connect four's 6 x 7 board of
two planes, the learner's pieces and the opponent's, as ``lit_ppo.envs.turn_based`` flattens it).

Why a convolution: an MLP over the flattened board has to learn every line of four at every place on its own, and
the places its self-play games seldom reach stay blind spots (issue 44: a 256 x 256 MLP that beats the scripted
player 86.5% of the time from the second seat still lets a random player win 7.3%, e.g. leaving its own open three
in a column unplayed). A ``kernel`` x ``kernel`` filter reads every window of the board with the same weights, and
on connect four's board a 4 x 4 window holds every line of four that passes through it.
"""

import math

from torch import Tensor, nn

from lit_ppo.networks.encoders import layer_init


class BoardCNN(nn.Module):
    """One ``kernel`` x ``kernel`` convolution (no padding: each output is one whole window of the board), ReLU, then a
    ReLU linear layer to ``features``: the trunk the actor's and the critic's linear heads share.

    The observation is ``[batch, height * width * planes]`` (or already ``[batch, height, width, planes]``), planes
    last, as PettingZoo's classic games give their boards.
    """

    def __init__(self, height: int = 6, width: int = 7, planes: int = 2, channels: int = 64, kernel: int = 4,
                 features: int = 256) -> None:
        super().__init__()
        for name, value in dict(height=height, width=width, planes=planes, channels=channels, kernel=kernel,
                                features=features).items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"BoardCNN: {name} must be a positive integer, got {value!r}.")
        if kernel > min(height, width):
            raise ValueError(f"BoardCNN: kernel {kernel} does not fit a {height} x {width} board; give a kernel of at "
                             f"most {min(height, width)}.")
        self.board_shape = (height, width, planes)
        windows = (height - kernel + 1) * (width - kernel + 1)
        self.layers = nn.Sequential(
            layer_init(nn.Conv2d(planes, channels, kernel), math.sqrt(2)), nn.ReLU(), nn.Flatten(),
            layer_init(nn.Linear(channels * windows, features), math.sqrt(2)), nn.ReLU(),
        )

    def forward(self, obs: Tensor) -> Tensor:
        size = math.prod(self.board_shape)
        if obs.shape[1:].numel() != size:
            height, width, planes = self.board_shape
            raise ValueError(f"BoardCNN: each observation has {obs.shape[1:].numel()} values (shape "
                             f"{tuple(obs.shape[1:])}), not the {size} of a {height} x {width} board of {planes} "
                             f"planes; set model.network's init_args height, width and planes to the game's board.")
        board = obs.float().reshape(-1, *self.board_shape).permute(0, 3, 1, 2)  # planes last -> channels first
        return self.layers(board)

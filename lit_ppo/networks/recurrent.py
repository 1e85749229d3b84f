"""The recurrent core (``model.recurrent``): an LSTM or GRU between the observation encoder and the actor/critic
layers, and the one rule that makes acting and learning agree: the state is zeroed at every episode start.

The state of a batch of ``n`` environments travels as one float tensor ``[n, state_size]`` (an LSTM's ``h`` and
``c`` of every layer side by side, a GRU's ``h``), so that rollouts, checkpoints and exported files carry a plain
tensor whatever the cell. ``starts`` flags the inputs that begin an episode: the state entering such a step is
replaced by zeros, during acting (one step at a time) and in the update (whole sequences) alike.
"""

from dataclasses import dataclass
from typing import Any, Optional

import torch
from torch import Tensor, nn

from lit_ppo.errors import ConfigError

CELLS = {"lstm": nn.LSTM, "gru": nn.GRU}


@dataclass(frozen=True)
class RecurrentConfig:
    """``model.recurrent``: ``{cell: lstm|gru, hidden_size: 128, layers: 1}`` (every key optional)."""

    cell: str = "lstm"
    hidden_size: int = 128
    layers: int = 1

    @classmethod
    def parse(cls, config: Any) -> Optional["RecurrentConfig"]:
        """The config from the ``model.recurrent`` value: None/false (off), true (the defaults) or a mapping."""
        if config is None or config is False:
            return None
        if config is True:
            return cls()
        if not isinstance(config, dict):
            raise ConfigError(f"model.recurrent: must be a mapping such as {{cell: lstm, hidden_size: 128, layers: 1}}"
                              f" (or null for a feed-forward policy), got {config!r}.")
        unknown = set(config) - {"cell", "hidden_size", "layers"}
        if unknown:
            raise ConfigError(f"model.recurrent: unknown key(s) {sorted(unknown)}; the keys are cell, hidden_size, "
                              "layers.")
        parsed = cls(**config)
        if parsed.cell not in CELLS:
            raise ConfigError(f"model.recurrent.cell: must be one of {tuple(CELLS)}, got {parsed.cell!r}.")
        for key in ("hidden_size", "layers"):
            value = getattr(parsed, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"model.recurrent.{key}: must be a positive integer, got {value!r}.")
        return parsed


class RecurrentCore(nn.Module):
    """``core(features [T, n, F], state [n, S], starts [T, n]) -> (outputs [T, n, hidden_size], state)``.

    Weights are orthogonal (gain 1) with zero biases, as in CleanRL's LSTM PPO. One step (``T = 1``: acting,
    export) returns the state after it. A sequence (the update) returns its outputs only (state None): each
    environment's sequence is cut into episode pieces at its starts, the pieces are padded to a common length and
    run through the fused cell in one call, each from its own initial state (zeros where it starts an episode, the
    stored state where it continues one); padding only follows a piece, so it never reaches an output that is kept.
    One call instead of one per segment between start steps: forward and backward 6.3 ms against 17.4 ms for 8 envs
    x 32 steps with starts on 14 distinct steps, 4.0 against 6.6 ms with 3 (LSTM 128, one thread, 2-core Xeon;
    ``PYTHONPATH=benchmarks python benchmarks/archive/recurrent_core.py [--start-probability 0.01]``).
    """

    def __init__(self, input_size: int, config: RecurrentConfig) -> None:
        super().__init__()
        self.config = config
        self.cell = CELLS[config.cell](input_size, config.hidden_size, config.layers)
        for name, param in self.cell.named_parameters():
            if "weight" in name:
                nn.init.orthogonal_(param, 1.0)
            else:
                nn.init.zeros_(param)
        self.parts = 2 if config.cell == "lstm" else 1  # (h, c) or h
        self.hidden_size = config.hidden_size
        self.state_size = self.parts * config.layers * config.hidden_size

    def initial_state(self, n: int, device: Optional[torch.device] = None) -> Tensor:
        return torch.zeros((n, self.state_size), device=device)

    def _unpack(self, state: Tensor):
        # [n, S] -> [layers, n, hidden] per part, as torch's cells take them
        n = state.shape[0]
        parts = state.view(n, self.parts, self.config.layers, self.hidden_size).permute(1, 2, 0, 3)
        return (parts[0].contiguous(), parts[1].contiguous()) if self.parts == 2 else parts[0].contiguous()

    def _pack(self, hidden) -> Tensor:
        parts = torch.stack(hidden if self.parts == 2 else (hidden,))  # [parts, layers, n, hidden]
        return parts.permute(2, 0, 1, 3).reshape(parts.shape[2], self.state_size)

    def forward(self, features: Tensor, state: Tensor, starts: Tensor) -> tuple[Tensor, Optional[Tensor]]:
        if features.shape[1] != state.shape[0] or starts.shape != features.shape[:2]:
            raise ValueError(f"recurrent core: features {tuple(features.shape)}, state {tuple(state.shape)} and starts "
                             f"{tuple(starts.shape)} do not agree on [steps, envs]")
        state = state.to(features.dtype)
        if features.shape[0] == 1:  # no data-dependent shapes here: export traces this path
            state = state * (~starts[0]).unsqueeze(1).to(state.dtype)
            out, hidden = self.cell(features, self._unpack(state))
            return out, self._pack(hidden)
        return self._pieces(features, state, starts), None

    def _pieces(self, features: Tensor, state: Tensor, starts: Tensor) -> Tensor:
        steps, n = starts.shape
        begins = starts.clone()
        begins[0] = True
        flat = begins.T.reshape(-1)  # env-major: position e * steps + t
        piece = flat.long().cumsum(0) - 1  # the piece of each position
        first = torch.nonzero(flat).flatten()  # each piece's first position (one host sync, for the shapes)
        within = torch.arange(n * steps, device=features.device) - first[piece]
        padded = features.new_zeros((int(within.max()) + 1, first.numel(), features.shape[-1]))
        padded[within, piece] = features.transpose(0, 1).reshape(n * steps, -1)
        env = first // steps
        continues = ((first % steps == 0) & ~starts[0][env]).to(state.dtype).unsqueeze(1)  # else zeros: a start
        out, _ = self.cell(padded, self._unpack(state[env] * continues))
        return out[within, piece].view(n, steps, -1).transpose(0, 1)

"""The episodes that end during one rollout, as the vector env reports them in its ``info``."""

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor


@dataclass
class FinishedEpisodes:
    """Each finished episode's return, length and row (gymnasium's ``info["episode"]``, from its
    ``RecordEpisodeStatistics`` or a multi-agent adapter), and with several agents each finished copy's team return
    (``info["team_episode"]``: its agents' returns summed, :mod:`lit_ppo.envs.multiagent`)."""

    returns: list[float] = field(default_factory=list)
    lengths: list[float] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    team_returns: list[float] = field(default_factory=list)

    def read(self, info: dict[str, Any]) -> None:
        if "_episode" in info:
            ended = np.flatnonzero(info["_episode"])
            self.returns.extend(info["episode"]["r"][ended].tolist())
            self.lengths.extend(info["episode"]["l"][ended].tolist())
            self.rows.extend(ended.tolist())
        if "_team_episode" in info:
            self.team_returns.extend(info["team_episode"]["r"][np.flatnonzero(info["_team_episode"])].tolist())

    def rollout_fields(self) -> dict[str, Tensor]:
        """The :class:`lit_ppo.collection.rollout.Rollout` fields they fill."""
        return {"episode_returns": torch.tensor(self.returns, dtype=torch.float32),
                "episode_lengths": torch.tensor(self.lengths, dtype=torch.float32),
                "episode_rows": torch.tensor(self.rows, dtype=torch.long),
                "team_returns": torch.tensor(self.team_returns, dtype=torch.float32)}

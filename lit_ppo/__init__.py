"""PPO on any gymnasium environment, with acting on the CPU and learning wherever the Lightning Trainer says."""

from lit_ppo.batch import Rollout
from lit_ppo.data import PPODataModule
from lit_ppo.datasets import RolloutDataset
from lit_ppo.module import PPOModule
from lit_ppo.policy import TrainedPolicy, load_policy

__all__ = ["PPODataModule", "PPOModule", "Rollout", "RolloutDataset", "TrainedPolicy", "load_policy"]
__version__ = "0.1.0"

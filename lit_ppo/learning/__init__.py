"""Learning from a rollout: the LightningModule, PPO's objective and loss terms, decoupled PPO, metrics."""

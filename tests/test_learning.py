"""PPO that runs but does not learn is broken: short, seeded learning runs through the real Trainer."""

import lightning as L
import torch

from lit_ppo import PPODataModule, PPOModule


def test_cartpole_learns_within_a_small_budget(tmp_path):
    torch.set_num_threads(1)
    L.seed_everything(1)
    dm = PPODataModule("CartPole-v1", num_envs=8, num_steps=32, total_timesteps=25_600, gamma=0.98,
                       gae_lambda=0.8, update_epochs=20, minibatch_size=256, eval_episodes=20)
    model = PPOModule(env_spec=dm.env_spec, lr=1e-3, anneal_lr=True, anneal_clip=True, ent_coef=0.0)
    trainer = L.Trainer(max_epochs=-1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path)
    trainer.fit(model, dm)
    assert trainer.current_epoch == 100  # the budget: 25,600 steps / 256 per rollout
    [result] = trainer.validate(model, dm, verbose=False)
    # A random CartPole policy scores about 22; seeds 1-6 of this setting scored 127-500 (median 457).
    assert result["eval/return_mean"] >= 100, result


def test_cartpole_learns_on_a_next_step_autoreset_vector_env(tmp_path):
    """gymnasium's own CartPoleVectorEnv (``data.vectorization: native``, next-step autoreset: a reset step after
    every episode, weight 0), at the settings above."""
    torch.set_num_threads(1)
    L.seed_everything(1)
    dm = PPODataModule("CartPole-v1", num_envs=8, num_steps=32, total_timesteps=25_600, gamma=0.98,
                       gae_lambda=0.8, update_epochs=20, minibatch_size=256, eval_episodes=20,
                       vectorization="native")
    model = PPOModule(env_spec=dm.env_spec, lr=1e-3, anneal_lr=True, anneal_clip=True, ent_coef=0.0)
    trainer = L.Trainer(max_epochs=-1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path)
    trainer.fit(model, dm)
    [result] = trainer.validate(model, dm, verbose=False)
    assert result["eval/return_mean"] >= 100, result

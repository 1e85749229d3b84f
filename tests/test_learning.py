"""PPO that runs but does not learn is broken: short, seeded learning runs through the real Trainer."""

import lightning as L
import torch

from lit_ppo import PPODataModule, PPOModule

# configs/cartpole_fast.yaml (it solves CartPole in 7-16k steps on seeds 1-3) with a 30,720-step budget. Seeds 2-5
# scored 500 / 500 / 186 / 500 with sync envs and 494 / 500 / 500 / 446 with native ones (seeded: the same each run).
FAST = dict(num_envs=16, num_steps=32, total_timesteps=30_720, gamma=0.98, gae_lambda=0.8, update_epochs=20,
            minibatch_size=512, eval_episodes=20, normalize_obs=False, normalize_reward=False)


def test_cartpole_learns_within_a_small_budget(tmp_path):
    torch.set_num_threads(1)
    L.seed_everything(1)
    dm = PPODataModule("CartPole-v1", **FAST)
    model = PPOModule(env_spec=dm.env_spec, lr=5e-3, anneal_lr=True, anneal_clip=True, ent_coef=0.0, target_kl=None)
    trainer = L.Trainer(max_epochs=-1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path)
    trainer.fit(model, dm)
    assert trainer.current_epoch == 60  # the budget: 30,720 steps / 512 per rollout
    [result] = trainer.validate(model, dm, verbose=False)
    # A random CartPole policy scores about 22; 475 is CartPole-v1's "solved" (the maximum is 500).
    assert result["eval/return_mean"] >= 475, result


def test_cartpole_learns_on_a_next_step_autoreset_vector_env(tmp_path):
    """gymnasium's own CartPoleVectorEnv (``data.vectorization: native``, next-step autoreset: a reset step after
    every episode, weight 0), at the settings above."""
    torch.set_num_threads(1)
    L.seed_everything(1)
    dm = PPODataModule("CartPole-v1", vectorization="native", **FAST)
    model = PPOModule(env_spec=dm.env_spec, lr=5e-3, anneal_lr=True, anneal_clip=True, ent_coef=0.0, target_kl=None)
    trainer = L.Trainer(max_epochs=-1, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=tmp_path)
    trainer.fit(model, dm)
    [result] = trainer.validate(model, dm, verbose=False)
    assert result["eval/return_mean"] >= 475, result

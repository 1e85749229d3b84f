"""Invalid-action masks: hand-computed masked log-probabilities and entropies, masks through a whole training
run (no invalid action taken, and faster learning than without), and the errors a bad mask gets."""

import math

import gymnasium as gym
import lightning as L
import pytest
import torch

from lit_ppo import PPODataModule, PPOModule
from lit_ppo.networks.distributions import BernoulliHead, CategoricalHead, MultiCategoricalHead, exponential_race
from tests import masked_envs

ENV = "tests.masked_envs:LitPPOTest/InvalidActions-v0"


def test_masked_categorical_by_hand():
    head = CategoricalHead(4)
    logits = torch.tensor([[0.0, math.log(2.0), 5.0, 0.0]])
    mask = torch.tensor([[True, True, False, True]])  # action 2, the likeliest, is invalid
    masked = head.masked(logits, mask)
    # valid probabilities 1 : 2 : 1 -> 0.25, 0.5, 0, 0.25
    log_prob, entropy = head.log_prob_entropy(masked, torch.tensor([1]))
    assert log_prob.item() == pytest.approx(math.log(0.5))
    assert head.log_prob(masked, torch.tensor([2])).item() < -1e6  # probability 0
    assert entropy.item() == pytest.approx(1.5 * math.log(2.0))  # -(2 * .25 log .25 + .5 log .5)
    assert head.mode(masked).item() == 1  # the best valid action, not 2
    samples = torch.stack([head.sample(masked, torch.Generator().manual_seed(i)) for i in range(400)])
    assert 2 not in samples.tolist()


def test_a_zero_exponential_draw_never_picks_a_masked_action():
    # The CPU's exponential draw can be exactly 0. For a masked action (p = 0) that was 0 / 0 = NaN, and argmax
    # takes a NaN as the largest value: the invalid action was sampled.
    probs = torch.tensor([[0.0, 0.5, 0.5], [0.2, 0.0, 0.8]])
    race = torch.tensor([[0.0, 1.0, 2.0], [3.0, 0.0, 1.0]])
    assert exponential_race(probs, race).tolist() == [1, 2]  # the largest p / E among the valid ones
    # a zero draw for a valid action wins the race (p / E is +huge), as E -> 0 would
    assert exponential_race(torch.tensor([[0.1, 0.9]]), torch.tensor([[0.0, 1.0]])).tolist() == [0]


def test_masked_multi_discrete_and_multi_binary_by_hand():
    head = MultiCategoricalHead([2, 3], (2,))
    logits = torch.zeros(1, 5)
    mask = torch.tensor([[True, False, True, True, False]])  # component 0: only 0; component 1: 0 or 1
    masked = head.masked(logits, mask)
    assert head.log_prob(masked, torch.tensor([[0, 1]])).item() == pytest.approx(math.log(0.5))
    assert head.entropy(masked).item() == pytest.approx(math.log(2.0))  # 0 for the forced component
    assert head.components_valid(torch.tensor([[True, False, False, False, False]])).tolist() == [False]
    bern = BernoulliHead((2,))
    # element 0: only 1 allowed; element 1: both
    masked = bern.masked(torch.zeros(1, 2), torch.tensor([[False, True, True, True]]))
    assert bern.mode(masked).tolist() == [[1.0, 0.0]]
    assert bern.log_prob(masked, torch.tensor([[1.0, 1.0]])).item() == pytest.approx(math.log(0.5))
    assert bern.entropy(masked).item() == pytest.approx(math.log(2.0), abs=1e-6)


def _fit(action_masks, steps=8 * 128 * 12, seed=1):
    torch.set_num_threads(1)
    L.seed_everything(seed)
    dm = PPODataModule(ENV, num_envs=8, num_steps=128, total_timesteps=steps, minibatch_size=256, update_epochs=4,
                       action_masks=action_masks, eval_episodes=8)
    model = PPOModule(env_spec=dm.env_spec, lr=1e-3, anneal_lr=True, ent_coef=0.01)
    trainer = L.Trainer(max_epochs=-1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0)
    before = masked_envs.INVALID_TAKEN[0]
    trainer.fit(model, dm)
    invalid = masked_envs.INVALID_TAKEN[0] - before
    [result] = trainer.validate(model, dm, verbose=False)
    return invalid, result["eval/return_mean"], model.rollout_metrics["rollout/return_mean"]


@pytest.mark.parametrize("source", ["method", "info"])
def test_with_masks_no_invalid_action_is_ever_taken(source):
    invalid, eval_return, train_return = _fit(source, steps=8 * 128 * 3)
    assert invalid == 0
    assert eval_return == 20.0 and train_return == 20.0  # every episode runs its 20 valid steps


def test_masks_learn_faster_than_learning_the_invalid_actions():
    """Same budget (12 rollouts); seeds 1-3 here: without masks the training return was still far below 20."""
    invalid, eval_return, train_return = _fit(None)
    assert invalid > 0 and train_return < 15.0, (invalid, train_return)
    masked_invalid, masked_eval, masked_train = _fit("method")
    assert masked_invalid == 0 and masked_train == 20.0 > train_return


@pytest.mark.parametrize("bad, message", [
    ("empty", "sub-environment 0 at its step 5, allows no action"),
    ("shape", "expected 4 booleans per sub-environment"),
])
def test_a_bad_mask_is_named_with_the_sub_environment_and_the_step(cli_in_process, tmp_path, bad, message):
    proc = cli_in_process("fit", "--config", "cartpole.yaml", "--data.env_id", ENV, "--data.action_masks", "method",
                          "--data.env_kwargs", f"{{bad_mask_at: 5, bad: {bad}}}", "--trainer.logger", "false",
                          "--trainer.enable_progress_bar", "false", cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_masks_for_a_box_action_space_are_refused_before_training():
    from lit_ppo.errors import ConfigError

    with pytest.raises(ConfigError, match="data.action_masks: the action space .* has no action masks"):
        PPODataModule("Pendulum-v1", action_masks="method")
    with pytest.raises(ConfigError, match="must be null, 'method'"):
        PPODataModule(ENV, action_masks="infos")


def test_export_takes_the_mask_as_an_input(cli_in_process, tmp_path):
    pytest.importorskip("onnxruntime")
    from lit_ppo.tools.export import export, run_exported

    proc = cli_in_process("fit", "--config", "cartpole.yaml", "--data.env_id", ENV, "--data.action_masks", "info",
                          "--data.total_timesteps", "512", "--trainer.logger", "false",
                          "--trainer.enable_progress_bar", "false", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    ckpt = tmp_path / "runs/cartpole/checkpoints/last.ckpt"
    obs = torch.rand(64, 4)
    mask = torch.zeros(64, 4, dtype=torch.bool)
    mask[torch.arange(64), torch.arange(64) % 4] = True  # exactly one valid action per row
    for fmt, name in (("onnx", "policy.onnx"), ("torchscript", "policy.pt")):
        signature = export(ckpt, fmt, tmp_path / name)
        assert "'action_mask' bool [batch, 4]" in signature
        actions = run_exported(tmp_path / name, fmt, obs, mask)
        assert actions.tolist() == (torch.arange(64) % 4).tolist(), fmt  # the only valid action, every time

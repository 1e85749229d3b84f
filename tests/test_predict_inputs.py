"""``load_policy(...).predict`` refuses what it must not act on, naming the argument and what it should be: a NaN
observation never becomes a NaN action, and a mask with no valid action is refused as training refuses it."""

import numpy as np
import pytest
import torch

import lit_ppo

MASKED = "tests.masked_envs:LitPPOTest/InvalidActions-v0"  # Box(0, 1, (4,)) observations, Discrete(4) actions


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A recurrent policy trained with action masks: every argument predict checks applies to it."""
    from tests.conftest import run_cli

    run_dir = tmp_path_factory.mktemp("predict_inputs")
    run_cli("fit", "--config", "cartpole.yaml", "--data.env_id", MASKED, "--data.action_masks", "method",
            "--model.recurrent", "{hidden_size: 8}", "--data.total_timesteps", "512", "--data.num_steps", "64",
            "--data.minibatch_size", "128", "--trainer.logger", "false", "--trainer.enable_progress_bar", "false",
            cwd=run_dir)
    return run_dir / "runs/cartpole/checkpoints/last.ckpt"


@pytest.fixture(scope="module")
def policy(checkpoint):
    return lit_ppo.load_policy(checkpoint)


OBS, MASK = np.full(4, 0.5, np.float32), np.array([True, False, True, False])


def test_good_inputs_still_act(policy):
    action, state = policy.predict(OBS, action_masks=MASK, deterministic=True)
    assert action in (0, 2) and state.shape == (policy.policy.state_size,)
    actions, states = policy.predict(np.stack([OBS] * 3), state=np.stack([state] * 3), action_masks=[MASK] * 3)
    assert actions.shape == (3,) and states.shape == (3, policy.policy.state_size)


@pytest.mark.parametrize("observation, message", [
    (np.array([0.5, np.nan, 0.5, 0.5], np.float32), r"observation: non-finite value nan at index \[1\]"),
    (np.array([[0.5] * 4, [0.5, 0.5, 0.5, np.inf]], np.float32),
     r"observation: non-finite value inf at index \[1, 3\]"),
    (np.array(["a", "b", "c", "d"]), r"observation: expected numbers for Box\(0.0, 1.0, \(4,\), float32\), got an "
                                     r"array of <U1"),
], ids=["nan", "inf-in-a-batch", "strings"])
def test_an_observation_that_is_not_finite_numbers_is_refused(policy, observation, message):
    masks = MASK if observation.ndim == 1 else [MASK] * len(observation)
    with pytest.raises(ValueError, match=message):  # before: a NaN action or a TypeError from torch
        policy.predict(observation, action_masks=masks)


@pytest.mark.parametrize("kwargs, message", [
    ({"action_masks": np.zeros(4, bool)}, r"action_masks: row 0 allows no action: \[False, False, False, False\]"),
    ({"action_masks": np.ones(3, bool)}, r"action_masks: shape \(3,\) does not fit Discrete\(4\): expected \(4,\) "
                                         r"for one observation or \(n, 4\) for a batch of n"),
    ({"action_masks": MASK, "state": np.zeros(5, np.float32)},
     r"state: shape \(5,\) does not fit this policy's recurrent state: expected \(16,\) for one observation"),
], ids=["no-valid-action", "mask-size", "state-size"])
def test_a_mask_or_state_that_does_not_fit_is_refused(policy, kwargs, message):
    with pytest.raises(ValueError, match=message):
        policy.predict(OBS, **kwargs)


def test_a_batch_with_a_mask_of_another_batch_size_is_refused(policy):
    with pytest.raises(ValueError, match=r"action_masks: shape \(2, 4\) does not fit .* here \(3, 4\)"):
        policy.predict(np.stack([OBS] * 3), action_masks=[MASK] * 2)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA GPU is usable here")
def test_a_device_that_is_not_here_is_named(checkpoint):
    with pytest.raises(ValueError, match=r"device: 'cuda' cannot be used .*no CUDA GPU is usable here: use "
                                         r"device='cpu'"):
        lit_ppo.load_policy(checkpoint, device="cuda")

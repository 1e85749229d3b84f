"""Generated spaces (tests/space_envs.py): for each seeded case of observation and action spaces, a real fit (two
rollouts, their updates and a validation), a prediction through :func:`lit_ppo.load_policy` on the saved checkpoint
(one observation and a batch), and an export round-trip (ONNX where the export extra is installed, else
TorchScript); or, for a space no policy can take, a refusal before training that names the space and the part of
it at fault."""

import importlib.util
import math

import lightning as L
import numpy as np
import pytest
import torch
from gymnasium import spaces
from gymnasium.vector.utils import concatenate, create_empty_array

import lit_ppo
from lit_ppo.envs.spaces import observation_spec, observations_to_tensor
from lit_ppo.errors import ConfigError
from lit_ppo.networks.encoders import ObservationEncoder
from lit_ppo.tools.export import export
from tests.space_envs import allowed, generated_settings, generated_spaces, random_mask

ENV = "tests.space_envs:LitPPOTest/Generated-v0"
CASES = range(14)  # 9 fits of ~3 s of one core (2 of them the ONNX export) and 5 refusals
LEAVES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)
ONNX = all(importlib.util.find_spec(name) for name in ("onnx", "onnxscript", "onnxruntime"))


def refusals(space: spaces.Space, role: str, path: tuple[str, ...] = ()) -> list[list[str]]:
    """For each part of ``space`` that lit_ppo cannot take, depth first, what its refusal must say: the part (and
    the keys or items that lead to it) and why."""
    if role == "action":
        if not isinstance(space, LEAVES) or (isinstance(space, spaces.Box)
                                             and not np.issubdtype(space.dtype, np.floating)):
            return [[f"action space {space}", "not supported"]]
        return [[f"action space {space}", "has no values"]] if math.prod(space.shape) == 0 else []
    if isinstance(space, (spaces.Dict, spaces.Tuple)):
        named = space.spaces.items() if isinstance(space, spaces.Dict) else enumerate(space.spaces)
        kind = "key" if isinstance(space, spaces.Dict) else "item"
        return [found for key, part in named
                for found in refusals(part, role, (*path, f"whose {kind} {key!r} is {part}"))]
    if not isinstance(space, LEAVES):
        return [[*path, f"{space}", "not supported"]]
    return [[*path, f"{space}", "has no values"]] if math.prod(space.shape) == 0 else []


def leaves(space: spaces.Space, depth: int = 0):
    """(leaf, depth) for every leaf of a Dict/Tuple tree."""
    if isinstance(space, (spaces.Dict, spaces.Tuple)):
        for part in space.spaces.values() if isinstance(space, spaces.Dict) else space.spaces:
            yield from leaves(part, depth + 1)
    else:
        yield space, depth


def is_image(space: spaces.Space) -> bool:
    return (isinstance(space, spaces.Box) and space.dtype == np.uint8 and len(space.shape) in (2, 3)
            and bool(np.all(space.low == 0) and np.all(space.high == 255)))


def vector_width(space: spaces.Space) -> int:
    """Values of the observation's non-image Box parts: the width of the normalization statistics."""
    return sum(math.prod(leaf.shape) for leaf, _ in leaves(space)
               if isinstance(leaf, spaces.Box) and not is_image(leaf))


def kinds(observation: spaces.Space, action: spaces.Space) -> set[str]:
    """What a case exercises, for the coverage check: why it is refused, or what trains."""
    refused = {f"refused {role}: {refusal[-1]}" for role, space in (("observation", observation), ("action", action))
               for refusal in refusals(space, role)}
    if refused:
        return refused
    found = {f"action {type(action).__name__}"}
    for leaf, depth in leaves(observation):
        name = type(leaf).__name__
        found.add(name)
        if isinstance(leaf, spaces.Box):
            found.add(f"Box rank {len(leaf.shape)}" + (" in Dict/Tuple" if depth else ""))
            found.add("image" if is_image(leaf) else str(leaf.dtype))
            found.update({"CNN image"} if is_image(leaf) and sorted(leaf.shape)[-2] >= 36 else set())
            found.update({"unbounded"} if not leaf.is_bounded("both") else set())
        if isinstance(leaf, (spaces.Discrete, spaces.MultiDiscrete)) and np.any(leaf.start != 0):
            found.add(f"{name} start")
        if depth >= 2:
            found.add("nested two deep")
    if isinstance(action, spaces.Box):
        found.add(f"action Box rank {len(action.shape)}")
    return found


def sample_batch(space: spaces.Space, n: int, seed: int):
    space.seed(seed)
    samples = [space.sample() for _ in range(n)]
    return samples, concatenate(space, samples, create_empty_array(space, n))


def features(space: spaces.Space) -> int:
    """The encoder's features for an observation, by docs/environments.md's table: a Box its values (0-d: one), a
    uint8 image of at least 36 x 36 512 CNN features, Discrete/MultiDiscrete one-hot, MultiBinary its values."""
    if isinstance(space, (spaces.Dict, spaces.Tuple)):
        return sum(features(part) for part in (space.spaces.values() if isinstance(space, spaces.Dict) else space))
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.MultiDiscrete):
        return int(space.nvec.sum())
    return 512 if is_image(space) and sorted(space.shape)[-2] >= 36 else math.prod(space.shape)


def test_the_generated_cases_cover_every_kind_of_space_and_encode_as_documented():
    for case in CASES:
        observation_space, action_space = generated_spaces(case)
        if not refusals(observation_space, "observation"):
            _, batch = sample_batch(observation_space, 3, seed=case)
            encoder = ObservationEncoder(observation_spec(observation_space), normalize=True)
            assert encoder(observations_to_tensor(batch, observation_space)).shape == (3, features(observation_space))
            assert encoder.num_features == features(observation_space)
    covered = set().union(*(kinds(*generated_spaces(case)) for case in CASES))
    wanted = {"Box rank 0", "Box rank 0 in Dict/Tuple", "Box rank 1", "Box rank 2", "Box rank 3", "float16",
              "float64", "bool", "image", "CNN image", "unbounded", "Discrete start", "MultiDiscrete",
              "MultiDiscrete start", "MultiBinary", "nested two deep", "action Discrete", "action Box rank 0",
              "action MultiDiscrete", "action MultiBinary", "refused observation: not supported",
              "refused observation: has no values", "refused action: not supported"}
    assert wanted <= covered, sorted(wanted - covered)
    settings = [generated_settings(case) for case in CASES]
    assert {s["recurrent"] for s in settings} == {True, False} and {s["normalize"] for s in settings} == {True, False}
    assert {s["action_masks"] for s in settings} == {None, "method", "info"}


@pytest.mark.parametrize("case", CASES)
def test_a_generated_space_trains_predicts_and_exports_or_is_refused_before_training(case, tmp_path):
    observation_space, action_space = generated_spaces(case)
    settings = generated_settings(case)
    data_kwargs = dict(env_id=ENV, env_kwargs={"case": case, "masks": bool(settings["action_masks"])}, num_envs=2,
                       num_steps=8, total_timesteps=32, update_epochs=1, minibatch_size=8, eval_episodes=2,
                       normalize_obs=settings["normalize"], normalize_reward=settings["normalize"],
                       action_masks=settings["action_masks"], seed=case)
    expected = refusals(observation_space, "observation") + refusals(action_space, "action")
    if expected:  # refused when the data module is made: before any Trainer exists
        with pytest.raises(ConfigError) as err:
            lit_ppo.PPODataModule(**data_kwargs)
        for fragment in ["data.env_id", *expected[0]]:
            assert fragment in str(err.value), (fragment, str(err.value))
        return

    torch.manual_seed(case)
    data = lit_ppo.PPODataModule(**data_kwargs)
    recurrent = {"cell": "gru", "hidden_size": 8} if settings["recurrent"] else None
    model = lit_ppo.PPOModule(env_spec=data.env_spec, hidden_sizes=[16], recurrent=recurrent)
    trainer = L.Trainer(max_epochs=-1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=tmp_path)
    trainer.fit(model, data)
    assert trainer.global_step == 2 * 2  # 2 rollouts of 2 minibatches
    assert all(math.isfinite(model.rollout_metrics[key]) for key in ("losses/policy", "losses/value"))
    assert all(bool(p.isfinite().all()) for p in model.parameters())
    obs_rms = model.policy.encoder.obs_rms
    width = vector_width(observation_space)
    if settings["normalize"] and width:  # one statistic per value of the non-image Box parts, 0-d ones included
        assert obs_rms.mean.shape == (width,) and obs_rms.count == 2 * 16
    else:
        assert obs_rms is None
    checkpoint = tmp_path / "policy.ckpt"
    trainer.save_checkpoint(checkpoint)

    # One observation and a batch, as the env gives them; masks where the policy was trained with them.
    samples, batch = sample_batch(observation_space, 3, seed=case)
    rng = np.random.default_rng(case)
    masks = np.stack([random_mask(action_space, rng) for _ in samples]) if settings["action_masks"] else None
    mask = {} if masks is None else {"action_masks": masks}
    policy = lit_ppo.load_policy(checkpoint)
    single, _ = policy.predict(samples[0], deterministic=True, **({} if masks is None else {"action_masks": masks[0]}))
    actions, _ = policy.predict(batch, deterministic=True, **mask)
    sampled, _ = policy.predict(batch, **mask)
    np.testing.assert_allclose(np.asarray(single, np.float64), np.asarray(actions[0], np.float64), atol=1e-5)
    for i in range(3):
        for action in (actions[i], sampled[i]):
            assert action_space.contains(action), (action, action_space)
            assert masks is None or allowed(action_space, action, masks[i]), (action, masks[i])

    # The exported file: export() compares it with the checkpoint's policy (an episode for a recurrent one) and
    # raises otherwise; loaded back, it acts as the checkpoint does.
    path = tmp_path / ("policy.onnx" if ONNX else "policy.pt")
    export(checkpoint, "onnx" if ONNX else "torchscript", path)
    exported, _ = lit_ppo.load_policy(path).predict(batch, deterministic=True, **mask)
    np.testing.assert_allclose(np.asarray(exported, np.float64), np.asarray(actions, np.float64), atol=1e-5)

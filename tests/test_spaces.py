"""Every supported gymnasium space: its typed spec and conversions, heads against torch.distributions, observations
through the real Trainer, normalization statistics in checkpoints, environments from config, and the errors for
what is not supported."""

import importlib.util
import json
import math

import gymnasium as gym
import lightning as L
import numpy as np
import pytest
import torch
from gymnasium import spaces
from gymnasium.vector.utils import concatenate, create_empty_array

import lit_ppo
from lit_ppo import PPODataModule, PPOModule
from lit_ppo.networks.distributions import BernoulliHead, DiagGaussianHead, MultiCategoricalHead
from lit_ppo.envs.env_spec import describe_spaces
from lit_ppo.envs.make import make_vector_env
from lit_ppo.errors import ConfigError
from lit_ppo.collection.evaluation import evaluate_policy
from lit_ppo.networks.actor_critic import ActorCritic
from lit_ppo.networks.encoders import NormalizedObservation
from lit_ppo.networks.normalization import RunningMeanStd
from lit_ppo.collection.collector import RolloutCollector
from lit_ppo.envs.spaces import (
    BoxSpec,
    CompositeSpec,
    DiscreteSpec,
    MultiBinarySpec,
    MultiDiscreteSpec,
    UnsupportedSpaceError,
    action_spec,
    action_tensor_layout,
    batch_observations,
    observation_spec,
    observations_to_tensor,
    spec_from_dict,
    spec_to_dict,
)
from lit_ppo.tools.export import export
from tests.space_envs import ScalarDictEnv  # also registers LitPPOTest/Scalar-v0

OBSERVATIONS = {
    "box": lambda: spaces.Box(-1.0, 1.0, (3,), np.float32),
    "image_hwc": lambda: spaces.Box(0, 255, (36, 36, 3), np.uint8),
    "image_chw": lambda: spaces.Box(0, 255, (2, 40, 36), np.uint8),
    "discrete": lambda: spaces.Discrete(5, start=1),
    "dict": lambda: spaces.Dict({
        "pixels": spaces.Box(0, 255, (36, 36, 1), np.uint8),
        "position": spaces.Box(-5.0, 5.0, (2,), np.float64),
        "mode": spaces.Discrete(3),
        "switches": spaces.MultiBinary(2),
    }),
    "tuple": lambda: spaces.Tuple((spaces.Discrete(4), spaces.Box(-1.0, 1.0, (2,)),
                                   spaces.Dict({"levels": spaces.MultiDiscrete([2, 3])}))),
}
ACTIONS = {
    "discrete": lambda: spaces.Discrete(3, start=-1),
    "box": lambda: spaces.Box(-0.5, 0.5, (2,), np.float32),
    "multi_discrete": lambda: spaces.MultiDiscrete([3, 2]),
    "multi_binary": lambda: spaces.MultiBinary(3),
}


class SpacesEnv(gym.Env):
    """Random observations from the chosen space; rejects any action outside its action space; ends at random
    (terminated) or by its TimeLimit (truncated), so final observations of every space are bootstrapped."""

    def __init__(self, obs="box", act="discrete"):
        self.observation_space, self.action_space = OBSERVATIONS[obs](), ACTIONS[act]()
        self.actions = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        return self.observation_space.sample(), {}

    def step(self, action):
        if not self.action_space.contains(action):
            raise ValueError(f"action {action!r} outside {self.action_space}")
        self.actions.append(np.array(action))
        reward = -float(np.mean(np.abs(np.asarray(action, dtype=np.float64))))
        return self.observation_space.sample(), reward, bool(self.np_random.random() < 0.05), False, {}


gym.register("LitPPOTest/Spaces-v0", entry_point=SpacesEnv, max_episode_steps=12)


def _trainer(tmp_path, **kwargs):
    defaults = dict(max_epochs=-1, logger=False, enable_checkpointing=False,
                    enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
                    default_root_dir=tmp_path)
    return L.Trainer(**{**defaults, **kwargs})


# -- typed specs ----------------------------------------------------------------------------------------------
DICT_SPEC = CompositeSpec(
    (DiscreteSpec(3), BoxSpec((36, 36, 1), "uint8", image=True, channels_last=True), BoxSpec((2,), "float64"),
     MultiBinarySpec((2,))),
    keys=("mode", "pixels", "position", "switches"),  # gymnasium sorts a Dict's keys
)
OBSERVATION_SPECS = {
    "box": BoxSpec((3,), "float32"),
    "image_hwc": BoxSpec((36, 36, 3), "uint8", image=True, channels_last=True),
    "image_chw": BoxSpec((2, 40, 36), "uint8", image=True),
    "discrete": DiscreteSpec(5),
    "dict": DICT_SPEC,
    "tuple": CompositeSpec((DiscreteSpec(4), BoxSpec((2,)),
                            CompositeSpec((MultiDiscreteSpec((2, 3), (2,)),), keys=("levels",)))),
}
# (spec, shape and dtype of one action in the rollout buffer)
ACTION_SPECS = {
    "discrete": (DiscreteSpec(3), ((), torch.long)),
    "box": (BoxSpec((2,), "float32"), ((2,), torch.float32)),
    "multi_discrete": (MultiDiscreteSpec((3, 2), (2,)), ((2,), torch.long)),
    "multi_binary": (MultiBinarySpec((3,)), ((3,), torch.float32)),  # the Bernoulli's 0./1. samples
}


@pytest.mark.parametrize("name", sorted(OBSERVATIONS))
def test_observation_specs_and_their_plain_data_round_trip(name):
    spec = observation_spec(OBSERVATIONS[name]())
    assert spec == OBSERVATION_SPECS[name]
    data = spec_to_dict(spec)
    assert json.loads(json.dumps(data)) == data  # plain data: lists, ints, strings and bools
    assert spec_from_dict(data) == spec


def test_spec_geometry_widths_and_dtypes():
    assert OBSERVATION_SPECS["image_hwc"].geometry == (3, 36, 36)
    assert OBSERVATION_SPECS["image_chw"].geometry == (2, 40, 36)
    assert BoxSpec((36, 40), "uint8", image=True).geometry == (1, 36, 40)
    assert DICT_SPEC.width == 1 + 36 * 36 + 2 + 2 and DICT_SPEC.tensor_shape == (1301,)
    assert DICT_SPEC.tensor_dtype == torch.float32
    assert OBSERVATION_SPECS["tuple"].width == 1 + 2 + 2
    assert CompositeSpec((MultiBinarySpec((2,)), BoxSpec((4,), "uint8"))).tensor_dtype == torch.uint8
    # A uint8 Box is an image only with 2 or 3 axes and bounds [0, 255].
    assert not observation_spec(spaces.Box(0, 10, (36, 36), np.uint8)).image
    assert not observation_spec(spaces.Box(0, 255, (36,), np.uint8)).image
    assert spec_to_dict(DiscreteSpec(5)) == {"type": "discrete", "n": 5}
    with pytest.raises(ValueError, match="not a lit_ppo space spec"):
        spec_from_dict({"type": "dict", "keys": []})  # the format before typed specs


@pytest.mark.parametrize("name", sorted(ACTIONS))
def test_action_specs_and_their_buffer_layout(name):
    spec, layout = ACTION_SPECS[name]
    assert action_spec(ACTIONS[name]()) == spec
    assert action_tensor_layout(spec) == layout
    assert spec_from_dict(spec_to_dict(spec)) == spec


def test_integer_box_actions_are_not_supported():
    with pytest.raises(UnsupportedSpaceError, match="Box actions must be floating point"):
        action_spec(spaces.Box(0, 5, (2,), np.int64))


def test_single_observations_batch_as_the_vector_env_would_give_them():
    # Discrete(5, start=1): indices counted from 0.
    assert batch_observations([np.int64(3), np.int64(1)], spaces.Discrete(5, start=1)).tolist() == [2, 0]
    items = [(2, np.array([0.5, -0.5], np.float32), {"levels": np.array([1, 2])}),
             (0, np.array([1.0, 0.0], np.float32), {"levels": np.array([0, 0])})]
    packed = batch_observations(items, OBSERVATIONS["tuple"]())
    assert packed.dtype == torch.float32
    assert packed.tolist() == [[2.0, 0.5, -0.5, 1.0, 2.0], [0.0, 1.0, 0.0, 0.0, 0.0]]
    frames = [np.full((36, 36, 3), 9, np.uint8), np.zeros((36, 36, 3), np.uint8)]
    images = batch_observations(frames, OBSERVATIONS["image_hwc"]())
    assert images.dtype == torch.uint8 and images.shape == (2, 36, 36, 3)  # images stay uint8
    assert images[0].unique().tolist() == [9] and images[1].unique().tolist() == [0]


# -- heads against torch.distributions ------------------------------------------------------------------------
def test_diag_gaussian_matches_normal():
    head = DiagGaussianHead([2, 3])
    mean, log_std = torch.linspace(-1, 1, 12).reshape(2, 6), torch.linspace(-0.5, 0.3, 6)
    params = torch.cat([mean, log_std.expand(2, 6)], -1)
    actions = torch.linspace(-2, 2, 12).reshape(2, 2, 3)
    ref = torch.distributions.Normal(mean, log_std.exp())
    torch.testing.assert_close(head.log_prob(params, actions), ref.log_prob(actions.reshape(2, 6)).sum(-1))
    torch.testing.assert_close(head.entropy(params), ref.entropy().sum(-1))
    torch.testing.assert_close(head.mode(params), mean.reshape(2, 2, 3))
    big = torch.cat([mean[:1], log_std[None]], -1).expand(100_000, 12)
    samples = head.sample(big, torch.Generator().manual_seed(0)).reshape(-1, 6)
    assert samples.shape == (100_000, 6) and head.sample(params).shape == (2, 2, 3)
    torch.testing.assert_close(samples.mean(0), mean[0], atol=0.02, rtol=0)
    torch.testing.assert_close(samples.std(0), log_std.exp(), atol=0.02, rtol=0)


def test_multi_categorical_matches_independent_categoricals():
    head = MultiCategoricalHead([3, 2], shape=[2])
    logits = torch.tensor([[0.0, 1.0, 2.0, 0.5, -0.5], [3.0, -1.0, 0.5, 0.0, 0.0]])
    refs = [torch.distributions.Categorical(logits=logits[:, :3]), torch.distributions.Categorical(logits=logits[:, 3:])]
    actions = torch.tensor([[2, 0], [1, 1]])
    expected = refs[0].log_prob(actions[:, 0]) + refs[1].log_prob(actions[:, 1])
    torch.testing.assert_close(head.log_prob(logits, actions), expected)
    torch.testing.assert_close(head.entropy(logits), refs[0].entropy() + refs[1].entropy())
    assert head.mode(logits).tolist() == [[2, 0], [0, 0]]
    samples = head.sample(logits[:1].expand(100_000, 5), torch.Generator().manual_seed(0))
    for i, (a, b) in enumerate([(0, 3), (3, 5)]):
        freq = torch.bincount(samples[:, i], minlength=b - a).float() / samples.shape[0]
        torch.testing.assert_close(freq, logits[0, a:b].softmax(-1), atol=5e-3, rtol=0)


def test_bernoulli_matches_torch_bernoulli():
    head = BernoulliHead([3])
    logits = torch.tensor([[0.0, 2.0, -1.0], [-3.0, 0.5, 1.0]])
    ref = torch.distributions.Bernoulli(logits=logits)
    actions = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    torch.testing.assert_close(head.log_prob(logits, actions), ref.log_prob(actions).sum(-1))
    torch.testing.assert_close(head.entropy(logits), ref.entropy().sum(-1))
    assert head.mode(logits).tolist() == [[0.0, 1.0, 0.0], [0.0, 1.0, 1.0]]
    samples = head.sample(logits[:1].expand(100_000, 3), torch.Generator().manual_seed(0))
    torch.testing.assert_close(samples.mean(0), logits[0].sigmoid(), atol=5e-3, rtol=0)


def test_log_std_is_a_saved_optimized_parameter_initialized_to_minus_one_half():
    net = ActorCritic(BoxSpec((3,)), BoxSpec((2,)), [8])
    assert torch.equal(net.log_std.detach(), torch.full((2,), -0.5))  # a first std of 0.61 by default
    assert any(p is net.log_std for p in net.parameters())
    assert "log_std" in net.state_dict()
    params, _, _ = net(torch.zeros(4, 3))
    assert params.shape == (4, 4)  # means, then the log-stds


# -- actions in the environment -------------------------------------------------------------------------------
def test_box_actions_are_clipped_for_the_env_but_stored_as_sampled():
    envs = make_vector_env("LitPPOTest/Spaces-v0", 2, env_kwargs={"obs": "box", "act": "box"})
    policy = ActorCritic(BoxSpec((3,)), BoxSpec((2,)), [8])
    with torch.no_grad():
        policy.log_std.fill_(1.0)  # std e: most samples fall outside [-0.5, 0.5]
    collector = RolloutCollector(envs, 16, 0.99, 0.95, 0, torch.Generator().manual_seed(0))
    data = collector.collect(policy)
    sent = np.concatenate([np.stack(env.unwrapped.actions) for env in envs.unwrapped.envs])
    assert sent.shape == (32, 2) and np.abs(sent).max() <= 0.5  # SpacesEnv would have raised otherwise
    assert data["actions"].dtype == torch.float32 and data["actions"].shape == (32, 2)
    assert data["actions"].abs().max() > 1.0  # the sampled actions themselves
    logprob, _, _ = policy.evaluate(data["obs"], data["actions"])
    torch.testing.assert_close(logprob, data["logprobs"])


# PolicyPlacement output biases that make one action the mode whatever the observation, and that action as the env gets it.
MODES = {
    "discrete": ([0.0, 0.0, 5.0], [1]),  # index 2 of Discrete(3, start=-1)
    "box": ([0.3, 0.9], [0.3, 0.5]),  # the mean, clipped to the bounds
    "multi_discrete": ([0.0, 5.0, 0.0, 5.0, 0.0], [1, 0]),
    "multi_binary": ([2.0, -2.0, 2.0], [1, 0, 1]),
}


@pytest.mark.parametrize("act", sorted(ACTIONS))
def test_deterministic_evaluation_plays_the_mode(act):
    spec = describe_spaces("LitPPOTest/Spaces-v0", {"obs": "box", "act": act})
    policy = ActorCritic.from_env_spec(spec, hidden_sizes=[8])
    bias, expected = MODES[act]
    with torch.no_grad():
        policy.actor[-1].weight.zero_()
        policy.actor[-1].bias.copy_(torch.tensor(bias))
    envs = make_vector_env("LitPPOTest/Spaces-v0", 3, env_kwargs={"obs": "box", "act": act})
    _, lengths = evaluate_policy(policy, envs, 3, seed=0)
    for env, length in zip(envs.unwrapped.envs, lengths):
        sent = np.stack(env.unwrapped.actions[: int(length)])
        np.testing.assert_allclose(sent, np.broadcast_to(expected, sent.shape), rtol=0, atol=1e-6)


# -- observations through the real Trainer --------------------------------------------------------------------
class Recorder(L.Callback):
    def __init__(self):
        self.grads_finite, self.obs_dtypes = [], set()

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):  # once per minibatch update
        self.grads_finite.append(all(bool(p.grad.isfinite().all()) for p in pl_module.parameters()
                                     if p.grad is not None))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):  # once per rollout
        self.obs_dtypes.add(batch.obs.dtype)  # the batch is a lit_ppo.collection.rollout.Rollout


def _fit(tmp_path, obs, act, iterations=3, callbacks=(), normalize=True, **trainer_kwargs):
    dm = PPODataModule("LitPPOTest/Spaces-v0", env_kwargs={"obs": obs, "act": act}, num_envs=2, num_steps=16,
                       total_timesteps=32 * iterations, update_epochs=2, minibatch_size=16, eval_episodes=2,
                       normalize_obs=normalize, normalize_reward=normalize, seed=0)
    model = PPOModule(env_spec=dm.env_spec, hidden_sizes=[16])
    recorder = Recorder()
    trainer = _trainer(tmp_path, callbacks=[recorder, *callbacks], **trainer_kwargs)
    trainer.fit(model, dm)
    return dm, model, trainer, recorder


# (observation, action, observation dtype in the rollout buffer, encoder uses a CNN)
CASES = [
    ("box", "box", torch.float32, False),
    ("image_hwc", "discrete", torch.uint8, True),
    ("image_chw", "multi_binary", torch.uint8, True),
    ("discrete", "multi_discrete", torch.int64, False),
    ("dict", "box", torch.float32, True),
    ("tuple", "multi_binary", torch.float32, False),
]


@pytest.mark.parametrize("obs,act,obs_dtype,cnn", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_each_observation_space_trains_with_finite_losses(tmp_path, obs, act, obs_dtype, cnn):
    torch.manual_seed(0)
    dm, model, trainer, recorder = _fit(tmp_path, obs, act)
    assert len(recorder.grads_finite) == 3 * 2 * 2  # iterations x update epochs x minibatches
    assert all(recorder.grads_finite)
    assert all(math.isfinite(model.rollout_metrics[name]) for name in ("losses/policy", "losses/value"))
    assert recorder.obs_dtypes == {obs_dtype}
    assert bool(model.policy.encoder.cnns) == cnn
    [result] = trainer.validate(model, dm, verbose=False)
    assert math.isfinite(result["eval/return_mean"])


def test_observation_conversion_packs_dict_parts_in_key_order():
    space = OBSERVATIONS["dict"]()
    obs = {"pixels": np.full((2, 36, 36, 1), 7, np.uint8), "position": np.array([[1.5, -2.0], [0.0, 3.0]]),
           "mode": np.array([2, 0]), "switches": np.array([[1, 0], [0, 1]], np.int8)}
    packed = observations_to_tensor(obs, space)
    assert packed.dtype == torch.float32 and packed.shape == (2, 1 + 36 * 36 + 2 + 2)  # keys sorted by gymnasium
    assert packed[0, 0] == 2 and torch.all(packed[:, 1:1297] == 7)
    assert packed[1, 1297:].tolist() == [0.0, 3.0, 0.0, 1.0]
    spec = spec_from_dict(describe_spaces("LitPPOTest/Spaces-v0", {"obs": "dict", "act": "box"})["observation"])
    encoder = ActorCritic(spec, BoxSpec((2,)), [8]).encoder
    features = encoder(packed)
    # [position, 512 CNN features, one-hot mode, switches]
    assert features.shape == (2, 2 + 512 + 3 + 2)
    assert features[0, 514:517].tolist() == [0.0, 0.0, 1.0] and features[1, -2:].tolist() == [0.0, 1.0]


# -- normalization statistics ---------------------------------------------------------------------------------
def test_normalization_statistics_are_updated_once_per_rollout_and_survive_a_checkpoint(tmp_path):
    from lightning.pytorch.callbacks import ModelCheckpoint

    checkpoint = ModelCheckpoint(dirpath=tmp_path, save_last=True, save_on_train_epoch_end=True)
    dm, model, trainer, _ = _fit(tmp_path, "dict", "box", iterations=3, callbacks=[checkpoint],
                                 enable_checkpointing=True)
    policy = model.policy
    obs_rms, return_rms = policy.encoder.obs_rms, policy.return_rms
    assert obs_rms.mean.shape == (2,)  # the Dict's vector part only ("position")
    assert obs_rms.count.item() == return_rms.count.item() == 3 * 32  # every step of 3 rollouts, once
    assert obs_rms.var.min() > 0.5 and return_rms.var.item() > 0  # positions are uniform in [-5, 5]
    stats = {k: v.clone() for k, v in policy.state_dict().items() if "rms" in k}
    assert len(stats) == 6
    trainer.validate(model, dm, verbose=False)  # evaluation uses the statistics and does not update them
    assert all(torch.equal(v, policy.state_dict()[k]) for k, v in stats.items())

    saved = torch.load(tmp_path / "last.ckpt", weights_only=True)  # the env spec is plain data
    observation = saved["hyper_parameters"]["env_spec"]["observation"]
    assert observation["type"] == "composite" and observation["keys"] == ["mode", "pixels", "position", "switches"]
    reloaded = PPOModule.load_from_checkpoint(tmp_path / "last.ckpt")
    for key, value in stats.items():
        torch.testing.assert_close(reloaded.policy.state_dict()[key], value, rtol=0, atol=0)
    obs = observations_to_tensor({k: np.stack([s] * 4) for k, s in OBSERVATIONS["dict"]().sample().items()},
                                 OBSERVATIONS["dict"]())
    torch.testing.assert_close(reloaded.policy.act(obs, deterministic=True)[0], policy.act(obs, deterministic=True)[0])


def test_reward_scaling_divides_by_the_return_std_and_clips():
    policy = ActorCritic(BoxSpec((1,)), DiscreteSpec(2), [4], normalize_reward=True)
    rewards = torch.tensor([1.0, -2.0, 100.0])
    torch.testing.assert_close(policy.scale_rewards(rewards), torch.tensor([1.0, -2.0, 10.0]))  # identity at first
    policy.update_normalization(torch.zeros(4, 1), torch.tensor([0.0, 4.0, 0.0, 4.0]))  # var 4
    torch.testing.assert_close(policy.scale_rewards(rewards), torch.tensor([0.5, -1.0, 10.0]))


def _pooled_update(rank, world_size, init_file, batches, results):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    rms = RunningMeanStd((2,))
    for batch in batches[rank]:

        def reduce_sum(t):
            dist.all_reduce(t)
            return t

        rms.update(batch, reduce_sum)
    results[rank] = (rms.mean.clone(), rms.var.clone(), rms.count.clone())
    dist.destroy_process_group()


def test_statistics_pooled_across_ranks_equal_those_of_all_the_data(tmp_path):
    import torch.multiprocessing as mp

    gen = torch.Generator().manual_seed(0)
    # Two "ranks", two rollouts each, of different sizes and distributions.
    batches = [[torch.randn(50, 2, generator=gen) * 2 + 1, torch.randn(30, 2, generator=gen)],
               [torch.randn(70, 2, generator=gen) - 3, torch.randn(10, 2, generator=gen) * 5]]
    results = mp.Manager().dict()
    mp.spawn(_pooled_update, args=(2, tmp_path / "init", batches, results), nprocs=2)
    everything = torch.cat([b for rank in batches for b in rank]).double()  # the statistics are float64
    for rank in range(2):
        mean, var, count = results[rank]
        assert count.item() == everything.shape[0]
        torch.testing.assert_close(mean, everything.mean(0), rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(var, everything.var(0, unbiased=False), rtol=1e-12, atol=1e-12)


def test_running_statistics_equal_float64_statistics_of_the_whole_stream():
    # SB3's RunningMeanStd (float64 numpy, the same parallel merge) and the direct float64 moments of everything
    # seen agree to ~1e-15; so must these, on a stream of batches of different sizes, scales and offsets.
    rng = np.random.default_rng(0)
    batches = [rng.normal(loc, scale, size=(n, 3)).astype(np.float32)
               for loc, scale, n in ((5.0, 0.1, 7), (-3.0, 20.0, 1), (1e4, 1.0, 300), (0.0, 1e-3, 64), (2.0, 5.0, 2))]
    rms = RunningMeanStd((3,))
    for batch in batches:
        rms.update(torch.from_numpy(batch))
    everything = np.concatenate(batches).astype(np.float64)
    assert rms.mean.dtype == rms.var.dtype == rms.count.dtype == torch.float64
    assert rms.count.item() == everything.shape[0]
    np.testing.assert_allclose(rms.mean.numpy(), everything.mean(0), rtol=1e-12, atol=0)
    np.testing.assert_allclose(rms.var.numpy(), everything.var(0), rtol=1e-12, atol=0)


def test_running_statistics_count_exactly_past_float32s_integer_range():
    rms = RunningMeanStd(())
    rms.update(torch.zeros(2**24))
    rms.update(torch.ones(1))  # a float32 count stays at 2^24 here: 2^24 + 1 is not a float32
    assert rms.count.item() == 2**24 + 1
    assert rms.mean.item() == pytest.approx(1 / (2**24 + 1), rel=1e-12)


# -- 0-d Box observations (#46) -------------------------------------------------------------------------------
SCALAR = spaces.Box(-1.0, 1.0, shape=(), dtype=np.float32)
SCALAR_DICT = ScalarDictEnv().observation_space  # height (0-d), orientations (14,), velocity (9,)


def test_0d_box_observations_encode_to_one_feature_each_alone_and_nested():
    assert observation_spec(SCALAR) == BoxSpec((), "float32") and BoxSpec(()).width == 1
    alone = batch_observations([np.float32(0.5), -0.25], SCALAR)  # a numpy scalar, a Python float
    assert alone.shape == (2,) and alone.dtype == torch.float32  # [batch]: the env's shape, as exported files take it
    encoder = ActorCritic(observation_spec(SCALAR), DiscreteSpec(2), [8], normalize_obs=True).encoder
    assert encoder.obs_rms.mean.shape == (1,)
    torch.testing.assert_close(encoder(alone), torch.tensor([[0.5], [-0.25]]))  # count 0: the identity
    nested = spaces.Tuple((SCALAR, spaces.Dict(height=SCALAR, pose=spaces.Tuple((SCALAR, spaces.Discrete(3))))))
    obs = [(0.5, {"height": -1.0, "pose": (0.25, 2)}), (0.0, {"height": 1.0, "pose": (-0.5, 0)})]
    packed = batch_observations(obs, nested)
    assert packed.tolist() == [[0.5, -1.0, 0.25, 2.0], [0.0, 1.0, -0.5, 0.0]]
    encoder = ActorCritic(observation_spec(nested), DiscreteSpec(2), [8], normalize_obs=True).encoder
    assert encoder.obs_rms.mean.shape == (3,)  # the three 0-d parts; the Discrete is one-hot
    assert encoder(packed).tolist() == [[0.5, -1.0, 0.25, 0.0, 0.0, 1.0], [0.0, 1.0, -0.5, 1.0, 0.0, 0.0]]
    # A user's network (model.network) gets the observation as stored, [batch], normalized by (1,) statistics.
    inputs = NormalizedObservation(observation_spec(SCALAR), normalize=True)
    inputs.obs_rms.update(inputs.vector_part(torch.tensor([1.0, 3.0])))
    assert inputs.obs_rms.mean.tolist() == [2.0]
    torch.testing.assert_close(inputs(alone), torch.tensor([-1.5, -2.25]))  # (x - 2) / 1
    # A network that takes [batch] for one sample of features is told the shape it was given.
    with pytest.raises(ConfigError, match=r"returned \(64,\) for a batch of 2 observations, shape \(2,\) float32"):
        ActorCritic(observation_spec(SCALAR), DiscreteSpec(2), network="tests.user_networks.Torso")


class RolloutShapes(L.Callback):
    def __init__(self):
        self.rollouts = []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.rollouts.append(batch)


# data.env_id and the settings of each fit: the env alone or in a Dict, with recurrent cores, masks from the env's
# method or its info, and every kind of vectorization (native: ScalarVectorEnv, next-step autoreset) and overlap.
SCALAR_FITS = {
    "alone-recurrent-masks": dict(env_id="tests.space_envs:ScalarEnv", action_masks="method",
                                  recurrent={"cell": "gru", "hidden_size": 8}),
    "dict-async-masks": dict(env_id="tests.space_envs:ScalarDictEnv", vectorization="async", action_masks="info"),
    "alone-native": dict(env_id="LitPPOTest/Scalar-v0", vectorization="native"),
    "dict-overlap-recurrent": dict(env_id="tests.space_envs:ScalarDictEnv", overlap=True, normalize_reward=True,
                                   recurrent={"cell": "lstm", "hidden_size": 8}),  # rewards scaled: see test_overlap
}


@pytest.mark.parametrize("name", list(SCALAR_FITS))
def test_0d_observations_train_validate_predict_and_export(name, tmp_path, no_child_left):
    settings = dict(SCALAR_FITS[name])
    recurrent = settings.pop("recurrent", None)
    torch.manual_seed(0)
    dm = PPODataModule(**settings, num_envs=2, num_steps=8, total_timesteps=3 * 16, update_epochs=2,
                       minibatch_size=8, eval_episodes=2, seed=0)
    model = PPOModule(env_spec=dm.env_spec, hidden_sizes=[16], recurrent=recurrent)
    rollouts, recorder = RolloutShapes(), Recorder()
    trainer = _trainer(tmp_path, callbacks=[rollouts, recorder])
    trainer.fit(model, dm)
    width = 1 if "Dict" not in settings["env_id"] else 24
    assert [r.obs.shape for r in rollouts.rollouts] == [(16,) if width == 1 else (16, 24)] * 3
    assert len(recorder.grads_finite) == 3 * 2 * 2 and all(recorder.grads_finite)
    obs_rms = model.policy.encoder.obs_rms
    assert obs_rms.mean.shape == (width,) and obs_rms.count > 0  # normalize_obs is on by default
    if settings.get("action_masks"):  # every stored action was valid under its mask
        assert all(r.action_masks.gather(1, r.actions.view(-1, 1)).all() for r in rollouts.rollouts)
    [result] = trainer.validate(model, dm, verbose=False)
    assert math.isfinite(result["eval/return_mean"])
    trainer.save_checkpoint(tmp_path / "policy.ckpt")

    # One observation (for the 0-d Box: a Python float too) and a batch, as gymnasium gives them.
    space = SCALAR if width == 1 else SCALAR_DICT
    space.seed(1)
    samples = [space.sample() for _ in range(5)]
    batch = concatenate(space, samples, create_empty_array(space, 5))
    masks = np.array([[True, False, True]] * 5) if settings.get("action_masks") else None
    kwargs = {} if masks is None else {"action_masks": masks}
    policy = lit_ppo.load_policy(tmp_path / "policy.ckpt")
    actions, state = policy.predict(batch, deterministic=True, **kwargs)
    assert actions.shape == (5,) and (state is None) == (recurrent is None)
    assert masks is None or not (actions == 1).any()
    one = float(samples[0]) if width == 1 else samples[0]
    single, _ = policy.predict(one, deterministic=True, **({} if masks is None else {"action_masks": masks[0]}))
    assert single == actions[0]

    # Exported files take [batch] (alone) or [batch, 24] (packed Dict) float32 and act as the checkpoint does.
    formats = ["torchscript"] + (["onnx"] if all(importlib.util.find_spec(m) for m in ("onnx", "onnxscript",
                                                                                      "onnxruntime")) else [])
    for fmt in formats:
        path = tmp_path / f"policy.{'pt' if fmt == 'torchscript' else 'onnx'}"
        signature = export(tmp_path / "policy.ckpt", fmt, path)
        assert signature.startswith(f"input 'obs' float32 [batch{'' if width == 1 else ', 24'}]"), signature
        exported, _ = lit_ppo.load_policy(path).predict(batch, deterministic=True, **kwargs)
        np.testing.assert_array_equal(exported, actions)


def test_a_0d_observation_env_fits_predicts_and_exports_from_the_command_line(cli, tmp_path):
    # the dict variant goes through the same commands; its export signature is checked in process above
    env = "ScalarEnv"
    cli("fit", "--data.env_id", f"tests.space_envs:{env}", "--data.num_envs", "2", "--data.num_steps", "8",
        "--data.total_timesteps", "32", "--data.minibatch_size", "8", "--data.eval_episodes", "2",
        "--trainer.enable_progress_bar", "false", "--trainer.logger", "false", cwd=tmp_path)
    ckpt = tmp_path / "checkpoints/last.ckpt"
    predicted = cli("predict", "--ckpt_path", ckpt, "--data.eval_episodes", "3", cwd=tmp_path).stdout
    assert "predict: 3 episodes" in predicted
    fmt = "onnx" if importlib.util.find_spec("onnxruntime") else "torchscript"
    exported = cli("export", "--ckpt_path", ckpt, "--format", fmt, cwd=tmp_path).stdout
    assert "input 'obs' float32 [batch] -> output 'action' int64 [batch]" in exported
    assert ckpt.with_suffix(".onnx" if fmt == "onnx" else ".pt").exists()


# -- environments from config ---------------------------------------------------------------------------------
USER_ENV = '''
import gymnasium as gym
import numpy as np


class CoinEnv(gym.Env):
    """Guess a coin shown in the observation; not registered anywhere."""

    def __init__(self, length=5):
        self.observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.length, self.t, self.coin = length, 0, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.coin = 0, int(self.np_random.integers(2))
        return np.array([self.coin], np.float32), {}

    def step(self, action):
        reward = float(action == self.coin)
        self.t += 1
        self.coin = int(self.np_random.integers(2))
        return np.array([self.coin], np.float32), reward, self.t >= self.length, False, {}


class TextEnv(CoinEnv):
    def __init__(self):
        super().__init__()
        self.observation_space = gym.spaces.Text(8)
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "lit_ppo_user_envs.py").write_text(USER_ENV)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "lit_ppo_user_envs"


def test_unregistered_entry_point_with_kwargs_and_wrappers_trains(tmp_path, user_module):
    wrappers = [{"class_path": "gymnasium.wrappers.FrameStackObservation", "init_args": {"stack_size": 3}},
                "gymnasium.wrappers.FlattenObservation"]
    dm = PPODataModule(f"{user_module}:CoinEnv", env_kwargs={"length": 4}, wrappers=wrappers, num_envs=2,
                       num_steps=8, total_timesteps=32, update_epochs=1, minibatch_size=8, eval_episodes=2)
    assert dm.env_spec["observation"]["shape"] == [3]
    model = PPOModule(env_spec=dm.env_spec, hidden_sizes=[8])
    trainer = _trainer(tmp_path)
    trainer.fit(model, dm)
    [result] = trainer.validate(model, dm, verbose=False)
    assert result["eval/length_mean"] == 4  # env_kwargs reached the constructor


def test_gymnasium_module_colon_id_form_imports_the_registering_module(user_module):
    spec = describe_spaces("gymnasium.envs.classic_control:Pendulum-v1")
    assert spec["action"] == {"type": "box", "shape": [1], "dtype": "float32", "image": False, "channels_last": False}


BAD = [
    ({"env_id": "lit_ppo_no_such_module:MyEnv"}, ["data.env_id", "cannot import module", "'lit_ppo_no_such_module'"]),
    ({"env_id": "lit_ppo_user_envs:NoSuchEnv"}, ["data.env_id", "'lit_ppo_user_envs'", "NoSuchEnv"]),
    ({"env_id": "lit_ppo_user_envs:TextEnv"}, ["data.env_id", "Text(", "not supported", "Dict/Tuple", "MultiBinary"]),
    ({"env_id": "LitPPOTest/Spaces-v0", "env_kwargs": {"obs": "box", "act": "nope"}}, ["data.env_id", "KeyError"]),
    ({"env_id": "CartPole-v1", "wrappers": ["gymnasium.wrappers.NoSuchWrapper"]},
     ["data.wrappers[0]", "cannot import", "NoSuchWrapper"]),
    ({"env_id": "CartPole-v1", "wrappers": [{"class_path": "gymnasium.wrappers.FrameStackObservation",
                                             "init_args": {"stack": 2}}]},
     ["data.wrappers[0]", "FrameStackObservation", "stack"]),
    ({"env_id": "CartPole-v1", "wrappers": [{"init_args": {}}]}, ["data.wrappers[0]", "class_path"]),
]


@pytest.mark.parametrize("kwargs,expected", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_environment_settings_name_what_went_wrong(user_module, kwargs, expected):
    with pytest.raises(ConfigError) as err:
        PPODataModule(**kwargs)
    for fragment in expected:
        assert fragment in str(err.value), (fragment, str(err.value))


@pytest.mark.parametrize("space", [
    spaces.Graph(spaces.Box(0, 1, (2,)), spaces.Discrete(2)),
    spaces.Sequence(spaces.Discrete(2)),
    spaces.Dict({"inner": spaces.Tuple((spaces.Discrete(2), spaces.Text(4)))}),
], ids=["graph", "sequence", "text-in-dict"])
def test_unsupported_observation_spaces_are_named(space):
    with pytest.raises(UnsupportedSpaceError, match="not supported") as err:
        observation_spec(space)
    name = "Text" if isinstance(space, spaces.Dict) else type(space).__name__
    assert f"{name}(" in str(err.value)


@pytest.mark.parametrize("role,space,part", [
    ("observation", spaces.Box(0, 255, (36, 36, 0), np.uint8), "Box([], [], (36, 36, 0), uint8)"),
    ("observation", spaces.Dict(fine=spaces.Discrete(2), empty=spaces.Tuple((spaces.MultiDiscrete([]),))),
     "whose key 'empty' is Tuple(MultiDiscrete([])), whose item 0 is MultiDiscrete([])"),
    ("action", spaces.MultiDiscrete([]), "action space MultiDiscrete([])"),
    ("action", spaces.Box(-1.0, 1.0, (2, 0)), "action space Box([], [], (2, 0), float32)"),
], ids=["image-without-channels", "nested-empty-part", "empty-multi-discrete-action", "empty-box-action"])
def test_spaces_with_no_values_are_refused_naming_the_part(role, space, part):
    # Before: a CNN over 0 channels or a head over no components crashed; a Box((0,)) trained blind.
    with pytest.raises(UnsupportedSpaceError, match="has no values") as err:
        (observation_spec if role == "observation" else action_spec)(space)
    assert part in str(err.value)


def test_unsupported_action_space_is_named():
    with pytest.raises(UnsupportedSpaceError, match=r"Tuple\(Discrete\(2\), Discrete\(3\)\).*not supported.*Discrete, Box"):
        action_spec(spaces.Tuple((spaces.Discrete(2), spaces.Discrete(3))))


# -- learning with the Gaussian head --------------------------------------------------------------------------
def test_pendulum_learns_within_a_small_budget(tmp_path):
    torch.set_num_threads(1)
    L.seed_everything(1)
    # configs/pendulum.yaml with a 61,440-step budget (30 rollouts); its first episodes are not staggered, its first
    # std is 1.
    dm = PPODataModule("Pendulum-v1", normalize_obs=True, normalize_reward=True, num_envs=16, num_steps=128,
                       total_timesteps=61_440, gamma=0.9, gae_lambda=0.95, update_epochs=10, minibatch_size=256,
                       eval_episodes=10, stagger_episodes=False)
    model = PPOModule(env_spec=dm.env_spec, lr=1e-3, anneal_lr=True, ent_coef=0.0, log_std_init=0.0)
    trainer = _trainer(tmp_path)
    [before] = trainer.validate(model, dm, verbose=False)
    trainer.fit(model, dm)
    [after] = trainer.validate(model, dm, verbose=False)
    # An untrained policy scores about -1,200 (it never swings up); -200 is about optimal.
    assert before["eval/return_mean"] < -900, before
    assert after["eval/return_mean"] > -450, after

import torch

from lit_ppo.envs import make_vector_env
from lit_ppo.module import PPOModule
from lit_ppo.networks import ActorCritic
from lit_ppo.data import PPODataModule, RolloutDataset
from lit_ppo.rollout import RolloutCollector


class ValueIsObservation:
    """A fixed policy whose value is the observation itself (the Counter env's step count), always action 0."""

    def act(self, obs, generator=None, deterministic=False):
        n = obs.shape[0]
        return torch.zeros(n, dtype=torch.long), torch.zeros(n), obs[:, 0].clone()

    def value(self, obs):
        return obs[:, 0].clone()


def _collector(env_id="LitPPOTest/Counter-v0", num_envs=1, num_steps=3, gamma=0.5, gae_lambda=0.0, seed=0):
    envs = make_vector_env(env_id, num_envs)
    return RolloutCollector(envs, num_steps, gamma, gae_lambda, seed, torch.Generator().manual_seed(seed))


def test_truncation_bootstraps_from_the_real_final_observation():
    # Counter env, TimeLimit 3: observations 0, 1, 2, then truncated with final observation 3.
    data, stats = _collector().collect(ValueIsObservation())
    # lambda = 0: advantage = delta = 1 + 0.5 * V(next) - V(obs); the last uses V(final obs) = 3, not V(reset) = 0.
    torch.testing.assert_close(data["advantages"], torch.tensor([1.5, 1.0, 0.5]))
    assert stats.episode_returns == [3.0] and stats.episode_lengths == [3]


def test_termination_does_not_bootstrap():
    data, _ = _collector("LitPPOTest/CounterEnds-v0").collect(ValueIsObservation())
    torch.testing.assert_close(data["advantages"], torch.tensor([1.5, 1.0, -1.0]))


def test_rollout_continues_across_calls_and_bootstraps_from_the_next_observation():
    collector = _collector(num_steps=2)
    first, _ = collector.collect(ValueIsObservation())
    # step 1 (obs 1) is not done: bootstrap from V(obs 2) = 2, the first observation of the next rollout.
    torch.testing.assert_close(first["advantages"], torch.tensor([1.5, 1.0 + 0.5 * 2 - 1]))
    second, _ = collector.collect(ValueIsObservation())
    assert second["obs"][:, 0].tolist() == [2.0, 0.0]


def _dataset(seed=3):
    dm = PPODataModule("CartPole-v1", num_envs=4, num_steps=16, update_epochs=2, minibatch_size=16, seed=seed)
    torch.manual_seed(seed)
    module = PPOModule(env_spec=dm.env_spec, hidden_sizes=[16])
    envs = make_vector_env("CartPole-v1", 4)
    collector = RolloutCollector(envs, 16, 0.99, 0.95, seed, torch.Generator().manual_seed(seed))
    return module, RolloutDataset(collector, lambda: module.policy, update_epochs=2, minibatch_size=16)


def test_dataset_yields_every_sample_once_per_epoch_with_the_right_shapes_and_dtypes():
    _, dataset = _dataset()
    batches = list(dataset)
    assert len(batches) == len(dataset) == 2 * (64 // 16)
    expected = {"obs": ((16, 4), torch.float32), "actions": ((16,), torch.long), "logprobs": ((16,), torch.float32),
                "values": ((16,), torch.float32), "advantages": ((16,), torch.float32),
                "returns": ((16,), torch.float32)}
    for batch in batches:
        assert {k: (tuple(v.shape), v.dtype) for k, v in batch.items()} == expected
        assert not batch["obs"].is_inference()
    # each update epoch is a permutation of the same 64 samples
    first = torch.cat([b["obs"] for b in batches[:4]])
    second = torch.cat([b["obs"] for b in batches[4:]])
    assert torch.equal(first[first[:, 0].argsort()], second[second[:, 0].argsort()])


def test_acting_uses_the_latest_weights():
    module, dataset = _dataset()
    with torch.no_grad():  # an "update" that makes action 1 certain
        last = module.policy.actor[-1]
        last.weight.zero_()
        last.bias.copy_(torch.tensor([-100.0, 100.0]))
    batches = list(dataset)
    assert all(torch.all(b["actions"] == 1) for b in batches)
    with torch.no_grad():
        last.bias.copy_(torch.tensor([100.0, -100.0]))
    assert all(torch.all(b["actions"] == 0) for b in dataset)


def test_same_seed_gives_the_same_rollout():
    runs = [list(_dataset(seed=5)[1]) for _ in range(2)]
    for a, b in zip(*runs):
        for key in a:
            assert torch.equal(a[key], b[key]), key
    other = list(_dataset(seed=6)[1])
    assert not torch.equal(runs[0][0]["obs"], other[0]["obs"])

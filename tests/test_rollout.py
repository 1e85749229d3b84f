import torch

from lit_ppo.envs import make_vector_env
from lit_ppo.module import PPOModule
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


def test_dataset_yields_one_rollout_with_every_sample_once_per_update_epoch():
    _, dataset = _dataset()
    items = list(dataset)
    assert len(items) == len(dataset) == 1  # one Lightning step per rollout
    rollout, indices = items[0]["rollout"], items[0]["minibatch_indices"]
    expected = {"obs": ((64, 4), torch.float32), "actions": ((64,), torch.long), "logprobs": ((64,), torch.float32),
                "values": ((64,), torch.float32), "advantages": ((64,), torch.float32),
                "returns": ((64,), torch.float32)}
    assert {k: (tuple(v.shape), v.dtype) for k, v in rollout.items()} == expected
    assert not any(v.is_inference() for v in rollout.values())  # the learner's autograd may save them
    # update_epochs=2 passes of 64 // 16 = 4 minibatches of 16; each pass is a permutation of all 64 samples
    assert indices.shape == (2, 4, 16) and indices.dtype == torch.long
    for epoch in indices:
        assert sorted(epoch.flatten().tolist()) == list(range(64))
    assert not torch.equal(indices[0], indices[1])  # shuffled anew each pass


def test_acting_uses_the_latest_weights():
    module, dataset = _dataset()
    with torch.no_grad():  # an "update" that makes action 1 certain
        last = module.policy.actor[-1]
        last.weight.zero_()
        last.bias.copy_(torch.tensor([-100.0, 100.0]))
    assert all(torch.all(item["rollout"]["actions"] == 1) for item in dataset)
    with torch.no_grad():
        last.bias.copy_(torch.tensor([100.0, -100.0]))
    assert all(torch.all(item["rollout"]["actions"] == 0) for item in dataset)


def test_same_seed_gives_the_same_rollout():
    runs = [list(_dataset(seed=5)[1])[0] for _ in range(2)]
    for key in runs[0]["rollout"]:
        assert torch.equal(runs[0]["rollout"][key], runs[1]["rollout"][key]), key
    assert torch.equal(runs[0]["minibatch_indices"], runs[1]["minibatch_indices"])
    other = list(_dataset(seed=6)[1])[0]
    assert not torch.equal(runs[0]["rollout"]["obs"], other["rollout"]["obs"])

import torch

from lit_ppo.collection.acting import PolicyPlacement
from lit_ppo.collection.rollout import SAMPLE, Rollout, fields_with_role
from lit_ppo.envs.make import make_vector_env
from lit_ppo.learning.module import PPOModule
from lit_ppo.collection.datamodule import PPODataModule
from lit_ppo.collection.datasets import RolloutDataset
from lit_ppo.collection.collector import RolloutCollector


class ValueIsObservation:
    """A fixed policy whose value is the observation itself (the Counter env's step count), always action 0."""

    def act(self, obs, generator=None, deterministic=False):
        n = obs.shape[0]
        return torch.zeros(n, dtype=torch.long), torch.zeros(n), obs[:, 0].clone(), None

    def value(self, obs):
        return obs[:, 0].clone()


def _collector(env_id="LitPPOTest/Counter-v0", num_envs=1, num_steps=3, gamma=0.5, gae_lambda=0.0, seed=0):
    envs = make_vector_env(env_id, num_envs)
    return RolloutCollector(envs, num_steps, gamma, gae_lambda, seed, torch.Generator().manual_seed(seed))


def test_truncation_bootstraps_from_the_real_final_observation():
    # Counter env, TimeLimit 3: observations 0, 1, 2, then truncated with final observation 3.
    data = _collector().collect(ValueIsObservation())
    # lambda = 0: advantage = delta = 1 + 0.5 * V(next) - V(obs); the last uses V(final obs) = 3, not V(reset) = 0.
    torch.testing.assert_close(data["advantages"], torch.tensor([1.5, 1.0, 0.5]))
    assert data["episode_returns"].tolist() == [3.0] and data["episode_lengths"].tolist() == [3]


def test_termination_does_not_bootstrap():
    data = _collector("LitPPOTest/CounterEnds-v0").collect(ValueIsObservation())
    torch.testing.assert_close(data["advantages"], torch.tensor([1.5, 1.0, -1.0]))


def test_rollout_continues_across_calls_and_bootstraps_from_the_next_observation():
    collector = _collector(num_steps=2)
    first = collector.collect(ValueIsObservation())
    # step 1 (obs 1) is not done: bootstrap from V(obs 2) = 2, the first observation of the next rollout.
    torch.testing.assert_close(first["advantages"], torch.tensor([1.5, 1.0 + 0.5 * 2 - 1]))
    second = collector.collect(ValueIsObservation())
    assert second["obs"][:, 0].tolist() == [2.0, 0.0]


def _dataset(seed=3, num_iterations=10):
    dm = PPODataModule("CartPole-v1", num_envs=4, num_steps=16, update_epochs=2, minibatch_size=16, seed=seed)
    torch.manual_seed(seed)
    module = PPOModule(env_spec=dm.env_spec, hidden_sizes=[16])
    envs = make_vector_env("CartPole-v1", 4)
    collector = RolloutCollector(envs, 16, 0.99, 0.95, seed, torch.Generator().manual_seed(seed))
    return module, RolloutDataset(collector, PolicyPlacement(module.policy), update_epochs=2, minibatch_size=16,
                                  steps_per_iteration=64, total_timesteps=64 * num_iterations)


def test_dataset_yields_one_rollout_with_every_sample_once_per_update_epoch():
    _, dataset = _dataset()
    items = list(dataset)
    assert len(items) == len(dataset) == 1  # one Lightning step per rollout
    assert isinstance(items[0], Rollout) and items[0].size == 64
    rollout = {k: v for k, v in items[0].minibatch()._asdict().items() if v is not None}
    indices = items[0].minibatch_indices
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
    assert all(torch.all(item.actions == 1) for item in dataset)
    with torch.no_grad():
        last.bias.copy_(torch.tensor([100.0, -100.0]))
    assert all(torch.all(item.actions == 0) for item in dataset)


def test_same_seed_gives_the_same_rollout():
    runs = [list(_dataset(seed=5)[1])[0] for _ in range(2)]
    for key in fields_with_role(SAMPLE):
        assert torch.equal(getattr(runs[0], key), getattr(runs[1], key)), key
    assert torch.equal(runs[0].minibatch_indices, runs[1].minibatch_indices)
    other = list(_dataset(seed=6)[1])[0]
    assert not torch.equal(runs[0].obs, other.obs)


def test_each_rollout_says_how_much_of_the_budget_was_done_before_it():
    # 3 rollouts of 64 steps in the budget: 0, 1/3 and 2/3 done before them; the third is the last.
    _, dataset = _dataset(num_iterations=3)
    rollouts = [item for _ in range(3) for item in dataset]
    assert [r.env_steps for r in rollouts] == [64, 128, 192]
    assert [r.budget_fraction for r in rollouts] == [0.0, 1 / 3, 2 / 3]
    assert [r.final for r in rollouts] == [False, False, True]
    assert dataset.collector.iterations == 3
    assert all(r.reward_returns.numel() == 0 for r in rollouts)  # reward normalization is off


def test_a_restored_collector_continues_the_same_episodes_and_iteration_count():
    collector = _collector(num_steps=2)
    collector.collect(ValueIsObservation())  # observations 0, 1; the next is 2
    state = collector.state_dict()
    restored = _collector(num_steps=2)
    assert restored.load_state_dict(state) is None  # the environments were pickled: no reset
    assert restored.iterations == 1 and restored.steps_taken == 2
    # step 2 (obs 2) is the last of the episode (TimeLimit 3): truncated with final observation 3.
    data = restored.collect(ValueIsObservation())
    assert data["obs"][:, 0].tolist() == [2.0, 0.0] and data["episode_lengths"].tolist() == [3]
    torch.testing.assert_close(data["advantages"], torch.tensor([1.0 + 0.5 * 3 - 2, 1.0 + 0.5 * 1 - 0]))
    assert restored.iterations == 2

import torch

from lit_ppo.collection.gae import compute_gae


def test_gae_against_hand_computed_values_with_termination_and_truncation():
    # One env, 4 steps: step 1 terminates, step 3 is truncated with V(final obs) = 2.0.
    rewards = torch.tensor([[1.0], [1.0], [1.0], [1.0]])
    values = torch.tensor([[0.5], [0.6], [0.7], [0.8]])
    # next_values[1] = 9.0 must be ignored: a terminated episode has no future value.
    next_values = torch.tensor([[0.6], [9.0], [0.8], [2.0]])
    terminated = torch.tensor([[0], [1], [0], [0]], dtype=torch.bool)
    dones = torch.tensor([[0], [1], [0], [1]], dtype=torch.bool)
    adv, ret = compute_gae(rewards, values, next_values, terminated, dones, gamma=0.9, gae_lambda=0.5)
    # deltas: 1+.9*.6-.5=1.04, 1-.6=.4, 1+.9*.8-.7=1.02, 1+.9*2-.8=2.0
    # advantages (gamma*lambda=.45, trace cut after each done): 1.04+.45*.4, .4, 1.02+.45*2.0, 2.0
    expected = torch.tensor([[1.22], [0.4], [1.92], [2.0]])
    torch.testing.assert_close(adv, expected)
    torch.testing.assert_close(ret, expected + values)


def test_gae_lambda_one_gives_discounted_returns_bootstrapped_at_the_end():
    rewards = torch.ones(3, 2)
    values = torch.zeros(3, 2)
    next_values = torch.tensor([[0.0, 0.0], [0.0, 0.0], [10.0, 10.0]])
    no = torch.zeros(3, 2, dtype=torch.bool)
    _, ret = compute_gae(rewards, values, next_values, no, no, gamma=0.5, gae_lambda=1.0)
    # G0 = 1 + .5 + .25 + .125 * 10
    torch.testing.assert_close(ret[:, 0], torch.tensor([3.0, 4.0, 6.0]))

"""One network per agent group (lit_ppo/envs/agent_groups.py, lit_ppo/networks/grouped.py): the rows' layout against
values written down, the refusals, each row through its own group's layers, a group's missing choices never taken,
a learning check that one shared network cannot pass, and the shipped speaker-listener config from the command line."""

import numpy as np
import pytest
import torch

pytest.importorskip("pettingzoo")

from lit_ppo.envs.multiagent import parallel_rows  # noqa: E402
from lit_ppo.errors import ConfigError  # noqa: E402
from lit_ppo.networks.distributions import MASKED_LOGIT  # noqa: E402
from tests.multiagent_envs import learned_signal_return  # noqa: E402

SIGNAL = "tests.multiagent_envs:signal"
APART = {"first": ["agent_0"], "second": ["agent_1"]}


def test_each_row_leads_with_its_group_and_is_padded_to_the_largest_observation():
    envs = parallel_rows(4, SIGNAL, {"odd_space": True, "odd_actions": True}, groups=APART)
    obs, _ = envs.reset(seed=10)
    bit = lambda seed: np.random.default_rng(seed).integers(2, size=2)  # noqa: E731  each copy's first bits
    # [group one-hot (2) | own observation padded to 3]: agent_0 observes 2 values, agent_1 3
    expected = [[1, 0, *np.eye(2)[bit(10)[0]], 0], [0, 1, *np.eye(3)[bit(10)[1]]],
                [1, 0, *np.eye(2)[bit(11)[0]], 0], [0, 1, *np.eye(3)[bit(11)[1]]]]
    assert obs.tolist() == expected
    assert envs.single_observation_space.shape == (5,) and envs.single_action_space.n == 3
    assert envs.group_spec == {"names": ["first", "second"], "of_agent": [0, 1], "actions": [2, 3]}
    envs.close()


def test_prefix_groups_agents_by_name_and_a_global_state_follows_the_agent_s_own_part():
    pytest.importorskip("mpe2")
    envs = parallel_rows(2, "mpe2.simple_speaker_listener_v4", {"continuous_actions": False}, global_state=True,
                         groups="prefix")
    obs, _ = envs.reset(seed=0)
    assert envs.group_spec == {"names": ["speaker", "listener"], "of_agent": [0, 1], "actions": [3, 5]}
    assert envs.local_size == 2 + 11 and obs.shape == (2, 13 + 14)  # one-hot, listener's 11, state() 14
    assert obs[:, :2].tolist() == [[1, 0], [0, 1]]
    assert obs[0, 5:13].tolist() == [0] * 8  # the speaker's 3 inputs, padded with 8 zeros
    # one global state for both rows: the env's state(), both agents' observations
    assert obs[0, 13:].tolist() == obs[1, 13:].tolist() == obs[0, 2:5].tolist() + obs[1, 2:13].tolist()
    envs.close()


@pytest.mark.parametrize("groups,message", [
    ({"a": ["agent_0"], "b": ["agent_9"]}, "has no agent 'agent_9'; its agents are \\['agent_0', 'agent_1'\\]"),
    ({"a": ["agent_0", "agent_1"], "b": ["agent_1"]}, "exactly one group; \\['agent_1'\\] are in several"),
    ({"a": ["agent_0"]}, "exactly one group; \\['agent_1'\\] are in none"),
    ("prefix", "group 'agent' holds agents of different spaces.*groups of their own"),
    ("by_name", "'by_name' is neither 'prefix' nor a mapping"),
], ids=["unknown_agent", "agent_twice", "agent_missing", "mixed_group", "unknown_rule"])
def test_a_bad_grouping_is_refused_by_name(groups, message):
    with pytest.raises(ConfigError, match=f"data.vectorization.groups: .*{message}"):
        parallel_rows(2, SIGNAL, {"odd_space": True}, groups=groups)


def _policy(groups=2, actions=(2, 3), action_space=None, inputs=5):
    from lit_ppo.envs.spaces import action_spec, observation_spec
    from lit_ppo.networks.actor_critic import ActorCritic
    import gymnasium as gym

    torch.manual_seed(0)
    space = action_space or gym.spaces.Discrete(max(actions))
    return ActorCritic(observation_spec(gym.spaces.Box(-1, 1, (inputs,)), ""), action_spec(space, ""),
                       hidden_sizes=[8], groups=groups, group_actions=None if action_space else list(actions))


def test_each_row_goes_through_its_own_group_s_layers_and_never_takes_a_choice_its_group_lacks():
    policy = _policy()
    obs = torch.cat([torch.eye(2).repeat(3, 1), torch.randn(6, 3)], 1)  # rows alternate groups
    with torch.no_grad():
        params, values, _ = policy(obs)
        for row in range(6):
            group = row % 2
            logits = policy.actor.layers[group](obs[row:row + 1])[0]
            choices = (2, 3)[group]
            torch.testing.assert_close(params[row, :choices], logits[:choices])
            assert (params[row, choices:] == MASKED_LOGIT).all()
            torch.testing.assert_close(values[row], policy.critic.layers[group](obs[row:row + 1])[0, 0])
        actions = policy.act(obs.repeat(200, 1))[0].view(200, 6)
    assert actions[:, 0::2].max() == 1 and actions[:, 1::2].max() == 2  # group 1 never chooses 2, group 2 does
    # a group's loss moves only that group's layers
    policy.zero_grad()
    policy(obs[0::2])[0][:, :2].sum().backward()
    other = policy.actor.layers[1][0].weight.grad
    assert policy.actor.layers[0][0].weight.grad.abs().sum() > 0 and (other is None or other.abs().sum() == 0)


def test_a_gaussian_head_has_a_log_std_per_group():
    import gymnasium as gym

    policy = _policy(action_space=gym.spaces.Box(-1, 1, (2,)))
    assert policy.log_std.shape == (2, 2)
    with torch.no_grad():
        policy.log_std[1] = -1.0
        params, _, _ = policy(torch.cat([torch.eye(2), torch.zeros(2, 3)], 1))
    assert params[0, 2:].tolist() == [-0.5, -0.5] and params[1, 2:].tolist() == [-1.0, -1.0]  # group 0: the default


def test_groups_with_a_recurrent_core_are_refused_by_name():
    from lit_ppo.envs.spaces import action_spec, observation_spec
    from lit_ppo.networks.actor_critic import ActorCritic
    import gymnasium as gym

    with pytest.raises(ConfigError, match="one network per agent group .*model.recurrent"):
        ActorCritic(observation_spec(gym.spaces.Box(-1, 1, (5,)), ""), action_spec(gym.spaces.Discrete(2), ""),
                    recurrent={"cell": "gru", "hidden_size": 8}, groups=2)


def test_two_groups_learn_opposite_answers_and_choices_only_one_has(tmp_path):
    # agent_1 earns 1 for the other bit and has a third choice that earns nothing (and that agent_0 lacks: the env
    # raises if it is taken); random play earns 4 and 2.7 of 8
    init_args = {"env_kwargs": {"odd_actions": True, "contrary": True}, "groups": APART}
    assert learned_signal_return(tmp_path, init_args) >= 7.5  # of 8 per agent


def test_the_speaker_listener_config_trains_exports_and_predicts_from_its_checkpoint(cli, tmp_path):
    pytest.importorskip("mpe2")
    name = "simple_speaker_listener"
    cli("fit", "--config", f"{name}.yaml", "--data.num_envs", "4", "--data.minibatch_size", "50",
        "--data.total_timesteps", "200", "--data.eval_episodes", "2", "--trainer.check_val_every_n_epoch", "1",
        cwd=tmp_path)
    ckpt = tmp_path / f"runs/{name}/checkpoints/last.ckpt"
    from lit_ppo import load_policy

    policy = load_policy(ckpt)
    speaker = np.concatenate([[1, 0], [0, 0, 1], np.zeros(8), np.zeros(14)]).astype(np.float32)
    actions = [int(policy.predict(speaker, deterministic=False)[0]) for _ in range(50)]
    assert set(actions) <= {0, 1, 2}  # the speaker's 3 words, never the listener's other moves
    pytest.importorskip("onnxruntime")
    out = cli("export", "--ckpt_path", str(ckpt), "--format", "onnx", cwd=tmp_path).stdout
    assert "input 'obs' float32 [batch, 27]" in out  # 2 group one-hot + 11 own (padded) + 14 state()

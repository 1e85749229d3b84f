import pytest
import torch
from torch import nn

import lit_ppo
from lit_ppo.networks.distributions import CategoricalHead
from lit_ppo.networks.actor_critic import ActorCritic, mlp
from lit_ppo.envs.spaces import BoxSpec, DiscreteSpec

SPEC = DiscreteSpec(3)
VECTOR = BoxSpec((4,))


def test_orthogonal_init_gains_and_zero_biases():
    torch.manual_seed(0)
    net = ActorCritic(VECTOR, SPEC, [64, 64])
    linears = [m for m in net.actor if isinstance(m, nn.Linear)] + [m for m in net.critic if isinstance(m, nn.Linear)]
    assert all(torch.count_nonzero(m.bias) == 0 for m in linears)
    hidden = net.actor[0].weight  # 64 x 4, orthogonal columns scaled by sqrt(2)
    torch.testing.assert_close(hidden.T @ hidden, 2.0 * torch.eye(4), atol=1e-5, rtol=0)
    policy_out = net.actor[-1].weight  # 3 x 64, orthogonal rows scaled by 0.01
    torch.testing.assert_close(policy_out @ policy_out.T, 1e-4 * torch.eye(3), atol=1e-8, rtol=0)
    value_out = net.critic[-1].weight
    assert value_out.norm().item() == pytest.approx(1.0, abs=1e-5)
    assert all(isinstance(m, nn.Tanh) for m in net.actor if not isinstance(m, nn.Linear))


def test_categorical_head_matches_torch_distributions():
    head = CategoricalHead(3)
    logits = torch.tensor([[0.0, 1.0, 2.0], [3.0, -1.0, 0.5]])
    ref = torch.distributions.Categorical(logits=logits)
    actions = torch.tensor([2, 1])
    torch.testing.assert_close(head.log_prob(logits, actions), ref.log_prob(actions))
    torch.testing.assert_close(head.entropy(logits), ref.entropy())
    torch.testing.assert_close(head.mode(logits), torch.tensor([2, 0]))


def test_categorical_sampling_frequencies_match_the_probabilities():
    head = CategoricalHead(3)
    logits = torch.tensor([0.0, 1.0, 2.0]).expand(200_000, 3)
    samples = head.sample(logits, torch.Generator().manual_seed(0))
    freq = torch.bincount(samples, minlength=3).float() / samples.numel()
    torch.testing.assert_close(freq, logits[0].softmax(-1), atol=5e-3, rtol=0)


def test_sampling_is_reproducible_with_a_seeded_generator():
    head = CategoricalHead(5)
    logits = torch.randn(64, 5)
    a = head.sample(logits, torch.Generator().manual_seed(7))
    b = head.sample(logits, torch.Generator().manual_seed(7))
    assert torch.equal(a, b)


def test_evaluate_is_fp32_under_bf16_autocast():
    net = ActorCritic(VECTOR, SPEC, [8])
    obs, actions = torch.randn(5, 4), torch.tensor([0, 1, 2, 0, 1])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logprob, entropy, value = net.evaluate(obs, actions)
    assert logprob.dtype == entropy.dtype == value.dtype == torch.float32
    # the same values as torch's Categorical on the bf16 logits, computed in float32 (a bf16 log_softmax would be off
    # by ~1e-2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = net(obs)[0]
    reference = torch.distributions.Categorical(logits=logits.float())
    torch.testing.assert_close(logprob, reference.log_prob(actions), rtol=0, atol=1e-6)
    torch.testing.assert_close(entropy, reference.entropy(), rtol=0, atol=1e-6)


def _image(shape, dtype="uint8"):
    return BoxSpec(tuple(shape), dtype, image=dtype == "uint8" and len(shape) in (2, 3),
                   channels_last=len(shape) == 3 and shape[2] < shape[0])


def test_encoder_choice_cnn_for_large_uint8_images_mlp_otherwise():
    from lit_ppo.errors import ConfigError

    assert len(ActorCritic(_image((4, 84, 84)), SPEC, [8]).encoder.cnns) == 1
    small = ActorCritic(_image((7, 7, 3)), SPEC, [8])  # MiniGrid-sized: flattened into the MLP
    assert len(small.encoder.cnns) == 0 and small.actor[0].in_features == 147
    assert len(ActorCritic(_image((40, 40, 3), "float32"), SPEC, [8]).encoder.cnns) == 0
    assert len(ActorCritic(_image((40, 40, 3), "float32"), SPEC, [8], encoder="cnn").encoder.cnns) == 1
    assert len(ActorCritic(_image((84, 84, 1)), SPEC, [8], encoder="mlp").encoder.cnns) == 0
    with pytest.raises(ConfigError, match="model.encoder.*at least 36x36"):
        ActorCritic(_image((7, 7, 3)), SPEC, [8], encoder="cnn")
    with pytest.raises(ConfigError, match="model.encoder"):
        ActorCritic(VECTOR, SPEC, [8], encoder="resnet")


def test_image_only_policy_shares_the_cnn_trunk_with_linear_heads_and_scales_uint8():
    torch.manual_seed(0)
    net = ActorCritic(_image((36, 40, 3)), SPEC, [64, 64])  # channels-last
    assert len(net.actor) == len(net.critic) == 1 and net.actor[0].in_features == 512
    frames = torch.randint(0, 256, (2, 36, 40, 3), dtype=torch.uint8)
    cnn = net.encoder.cnns[0]
    torch.testing.assert_close(net.encoder(frames), cnn(frames.permute(0, 3, 1, 2).float() / 255))
    gray = ActorCritic(_image((36, 36)), SPEC, [8])  # a single grayscale frame: one channel
    assert gray.encoder.cnns[0][0].in_channels == 1 and gray(torch.zeros(2, 36, 36, dtype=torch.uint8))[0].shape == (2, 3)


@pytest.mark.parametrize("activation,module,fn", [("tanh", nn.Tanh, torch.tanh), ("relu", nn.ReLU, torch.relu)])
def test_the_mlp_is_linear_layers_with_the_activation_between_on_small_and_large_batches(activation, module, fn):
    torch.manual_seed(0)
    net = mlp(64, [32, 16], 3, 0.01, activation)
    linears = [m for m in net if isinstance(m, nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(64, 32), (32, 16), (16, 3)]
    assert [type(m) for m in net if not isinstance(m, nn.Linear)] == [module, module]
    assert isinstance(ActorCritic(VECTOR, SPEC, [8], activation=activation).actor[1], module)
    with torch.no_grad():  # non-trivial weights everywhere (the output layer starts near zero, biases at zero)
        for p in net.parameters():
            p.add_(0.3 * torch.randn_like(p))
    for batch in (4, 256):  # small and large batches compute the same function
        x = torch.randn(batch, 64) * 4
        expected = x
        for i, layer in enumerate(linears):
            expected = expected @ layer.weight.T + layer.bias
            expected = fn(expected) if i < 2 else expected
        torch.testing.assert_close(net(x), expected, rtol=0, atol=1e-5)


def test_unknown_activation_is_named():
    from lit_ppo.errors import ConfigError

    with pytest.raises(ConfigError, match="model.activation.*'gelu'"):
        ActorCritic(VECTOR, SPEC, [8], activation="gelu")


USER_NETWORK_YAML = """
model:
  network:
    class_path: tests.user_networks.Torso
    init_args: {width: 32}
"""


def test_a_users_network_from_a_config_trains_and_its_checkpoint_validates(cli, cli_in_process, tmp_path):
    (tmp_path / "net.yaml").write_text(USER_NETWORK_YAML)
    common = ["--config", "cartpole.yaml", "--config", "net.yaml", "--trainer.enable_progress_bar", "false"]
    proc = cli_in_process("fit", *common, "--data.total_timesteps", "2560", "--trainer.callbacks.dirpath", "ckpt",
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    checkpoint = torch.load(tmp_path / "ckpt" / "last.ckpt", weights_only=True)
    assert checkpoint["hyper_parameters"]["network"] == {"class_path": "tests.user_networks.Torso",
                                                         "init_args": {"width": 32}}
    weights = checkpoint["state_dict"]
    # the user's two layers are the shared trunk; actor and critic are linear heads on its 32 features
    assert weights["policy.encoder.net.layers.0.weight"].shape == (32, 4)
    assert weights["policy.actor.0.weight"].shape == (2, 32) and weights["policy.critic.0.weight"].shape == (1, 32)
    assert "policy.actor.1.weight" not in weights
    # a fresh process rebuilds the network from the checkpoint's hyperparameters
    out = cli("validate", *common, "--ckpt_path", "ckpt/last.ckpt", cwd=tmp_path).stdout
    assert "eval/return_mean" in out
    # and so does load_policy, without Lightning: the user's trunk, its trained weights
    policy = lit_ppo.load_policy(tmp_path / "ckpt" / "last.ckpt")
    assert torch.equal(policy.policy.encoder.net.layers[0].weight, weights["policy.encoder.net.layers.0.weight"])


@pytest.mark.parametrize("network, message", [
    ("tests.user_networks.NotAModule", "made a NotAModule, not a torch.nn.Module"),
    ("tests.user_networks.Missing", "cannot import 'tests.user_networks.Missing'"),
    ("torch.nn.Identity", r"must return features of shape \[batch, n\]"),
])
def test_a_network_that_cannot_work_is_named(network, message):
    from lit_ppo.errors import ConfigError
    from lit_ppo.envs.spaces import BoxSpec, DiscreteSpec

    spec = BoxSpec((2, 3))  # Identity would hand back [batch, 2, 3]
    with pytest.raises(ConfigError, match=f"model.network: .*{message}"):
        ActorCritic(spec, DiscreteSpec(2), network=network)


def test_the_board_cnn_reads_each_plane_at_its_square_and_each_window_alike():
    from lit_ppo.networks.board import BoardCNN

    net = BoardCNN(channels=2, kernel=1, features=4)
    conv = net.layers[0]
    with torch.no_grad():  # a 1 x 1 convolution that copies each plane: its output is the board, channels first
        conv.weight.copy_(torch.eye(2).view(2, 2, 1, 1))
        conv.bias.zero_()
    seen = {}
    net.layers[1].register_forward_hook(lambda module, args, out: seen.update(board=out))
    obs = torch.zeros(1, 6 * 7 * 2)
    obs[0, (2 * 7 + 5) * 2 + 1] = 1.0  # PettingZoo's order, planes last: row 2, column 5, the opponent's plane
    net(obs)
    expected = torch.zeros(1, 2, 6, 7)
    expected[0, 1, 2, 5] = 1.0
    assert torch.equal(seen["board"], expected)

    # A 4 x 4 window reads a vertical three the same in any column and at any height: the convolution's outputs are
    # the same numbers, moved with it.
    net = BoardCNN()
    board = torch.zeros(2, 6, 7, 2)
    board[0, 3:6, 0, 0] = 1.0  # three in column 0, from the bottom
    board[1, 1:4, 3, 0] = 1.0  # the same three in column 3, two rows up
    net.layers[1].register_forward_hook(lambda module, args, out: seen.update(windows=out))
    net(board.flatten(1))
    assert seen["windows"].shape == (2, 64, 3, 4)  # one output per 4 x 4 window of the 6 x 7 board
    # the window with its corner at row 2, column 0 holds the first three as the one at row 0, column 3 the second
    assert torch.equal(seen["windows"][0, :, 2, 0], seen["windows"][1, :, 0, 3])
    assert not torch.equal(seen["windows"][0, :, 2, 0], seen["windows"][0, :, 0, 3])


@pytest.mark.parametrize("kwargs, message", [
    (dict(kernel=7), "kernel 7 does not fit a 6 x 7 board"),
    (dict(channels=0), "channels must be a positive integer"),
])
def test_a_board_cnn_that_cannot_fit_its_board_is_named(kwargs, message):
    from lit_ppo.networks.board import BoardCNN

    with pytest.raises(ValueError, match=message):
        BoardCNN(**kwargs)


def test_a_board_cnn_given_another_games_board_is_named_before_training():
    from lit_ppo.errors import ConfigError

    # tic-tac-toe's 3 x 3 x 2 board against connect four's default 6 x 7 x 2
    with pytest.raises(ConfigError, match=r"model.network: .*18 values .* not the 84 of a 6 x 7 board of 2 planes; "
                                          r"set model.network's init_args height, width and planes"):
        ActorCritic(BoxSpec((18,)), DiscreteSpec(9), network="lit_ppo.networks.board.BoardCNN")

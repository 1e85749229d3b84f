"""Bad settings fail fast, before any environment step or file is written, with the key and the fix named."""

import pytest

CASES = [
    (["--data.env_id", "NoSuchEnv-v0"], ["data.env_id", "NoSuchEnv-v0", "registered id"]),
    (["--data.env_id", "Pendulum-v1"], ["data.env_id", "Box", "not supported", "Discrete"]),
    (["--data.minibatch_size", "100"], ["data.minibatch_size", "must divide", "256"]),
    (["--model.clip_coef", "-0.1"], ["model.clip_coef", "must be positive"]),
    (["--data.num_envs", "0"], ["data.num_envs", "must be positive"]),
    (["--data.gamma", "1.5"], ["data.gamma", "[0, 1]"]),
    (["--data.total_timesteps", "100"], ["data.total_timesteps", "less than one iteration"]),
]


@pytest.mark.parametrize("override,expected", CASES, ids=[c[0][0] for c in CASES])
def test_bad_setting_fails_fast_with_a_clear_message(cli, tmp_path, override, expected):
    proc = cli("fit", "--config", "cartpole.yaml", *override, cwd=tmp_path, check=False)
    assert proc.returncode != 0
    for fragment in expected:
        assert fragment in proc.stderr, (fragment, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "runs/cartpole/checkpoints").exists()

"""``data.overlap``: a collector process one policy version behind the learner, as deterministic and resumable as
the synchronous path, with every child process joined on every exit path (lit_ppo/collection/overlap/dataset.py)."""

import os
import signal
import subprocess
import sys
import time
import warnings

import lightning as L
import pytest
import torch

from lit_ppo.errors import ConfigError
from lit_ppo import PPODataModule, PPOModule
from lit_ppo.networks.actor_critic import ActorCritic
from lit_ppo.collection.overlap.dataset import snapshot
from tests.conftest import REPO, session_processes, wait_for_file

BASE = ["--config", "cartpole.yaml", "--trainer.enable_progress_bar", "false", "--data.overlap", "true"]
FAULTY = "tests.faulty_envs:LitPPOTest/Faulty-v0"


class Versions(L.Callback):
    """Each rollout as the learner got it, with the learner's weights before its updates (version j for rollout j)."""

    def __init__(self) -> None:
        self.rollouts, self.weights = [], []

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.rollouts.append(batch)
        self.weights.append(snapshot(pl_module.policy))


def fit(iterations: int = 4, num_envs: int = 4, num_steps: int = 32, callbacks=(), trainer_kwargs=None, model_kwargs=None,
        **data_kwargs) -> tuple[PPOModule, PPODataModule]:
    L.seed_everything(3)
    data_kwargs = {"env_id": "CartPole-v1", "minibatch_size": num_envs * num_steps // 2, "update_epochs": 2, "seed": 3,
                   "overlap": True, **data_kwargs}
    data = PPODataModule(num_envs=num_envs, num_steps=num_steps, total_timesteps=iterations * num_envs * num_steps,
                         **data_kwargs)
    model = PPOModule(env_spec=data.env_spec, lr=3e-3, **(model_kwargs or {}))
    trainer = L.Trainer(max_epochs=-1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=list(callbacks), **(trainer_kwargs or {}))
    trainer.fit(model, data)
    return model, data


def logprobs_under(policy: ActorCritic, weights: dict, rollout, num_envs: int) -> torch.Tensor:
    """The log-probabilities ``weights`` give the rollout's actions, step by step as acting computed them."""
    policy.load_state_dict(weights)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the collector acts
    try:
        with torch.inference_mode():
            steps = zip(rollout.obs.split(num_envs), rollout.actions.split(num_envs))
            return torch.cat([policy.evaluate(obs, actions)[0] for obs, actions in steps])
    finally:
        torch.set_num_threads(threads)


def test_rollout_j_is_collected_with_the_weights_of_version_j_minus_1_exactly(no_child_left):
    versions = Versions()
    model, _ = fit(iterations=5, callbacks=[versions])
    policy = ActorCritic.from_env_spec(model.hparams.env_spec)
    behaviour = [0, 0, 1, 2, 3]  # rollouts 0 and 1 with the initial weights, then one version behind
    for j, rollout in enumerate(versions.rollouts):
        stored = rollout.logprobs
        assert torch.equal(logprobs_under(policy, versions.weights[behaviour[j]], rollout, 4), stored), j
        if j:  # the learner's own weights at rollout j are another policy: the test can tell them apart
            assert not torch.allclose(logprobs_under(policy, versions.weights[j], rollout, 4), stored, atol=1e-6), j


def first_rollout(overlap: bool, **data_kwargs):
    versions = Versions()
    fit(iterations=2, callbacks=[versions], overlap=overlap, **data_kwargs)
    return versions.rollouts[0]


@pytest.mark.parametrize("vectorization", [
    "sync", "async", "native", "envpool",
    {"class_path": "tests.vector_envs.cartpole", "init_args": {"autoreset_mode": "SameStep"}},
], ids=["sync", "async", "native", "envpool", "user-same-step"])
def test_every_vectorization_gives_the_synchronous_first_rollout(vectorization, no_child_left):
    # Rollout 0 is collected with the initial weights either way: the collector process builds the same stream.
    if vectorization == "envpool":
        pytest.importorskip("envpool")
    synchronous = first_rollout(False, vectorization=vectorization)
    overlapped = first_rollout(True, vectorization=vectorization)
    for name in ("obs", "actions", "logprobs", "values", "advantages", "returns", "weights", "minibatch_indices"):
        assert torch.equal(getattr(synchronous, name), getattr(overlapped, name)), name
    assert overlapped.timings["weights_wait_ms"] == 0.0 and overlapped.timings["rollout_wait_ms"] > 0


def test_recurrent_masked_normalized_and_bf16_runs_keep_the_lag_and_evaluate_with_the_learners_weights(no_child_left):
    versions = Versions()
    model, _ = fit(iterations=4, num_steps=16, callbacks=[versions], env_id="tests.masked_envs:LitPPOTest/InvalidActions-v0",
                   action_masks="method", minibatch_size=32, model_kwargs={"recurrent": {"cell": "gru", "hidden_size": 8}},
                   trainer_kwargs={"precision": "bf16-mixed", "check_val_every_n_epoch": 2}, normalize_reward=True)
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert model.policy.encoder.obs_rms.count > 0  # observation statistics reached the learner
    # every stored action was valid under the mask it was chosen with
    for rollout in versions.rollouts:
        assert rollout.action_masks.gather(1, rollout.actions.view(-1, 1)).all()
        assert rollout.recurrent_states.shape == (4, 8)
    # rollouts 0 and 1 acted with the same (initial) weights: their first steps' states are both zero, and the
    # recurrent state rollout 2 starts from is the collector's, carried over
    assert versions.rollouts[2].recurrent_states.abs().sum() > 0
    assert "eval/return_mean" in model.trainer.callback_metrics  # validation during fit, in the learner's process


def test_a_recurrent_overlapped_fit_with_the_critics_targets_scaled_is_refused_naming_the_keys(no_child_left):
    # its lagged rollouts' advantages would have to be recomputed by the learner's critic, value by value
    with pytest.raises(ConfigError, match="data.overlap: with data.return_scaling .* data.normalize_reward: true"):
        fit(iterations=2, num_steps=16, minibatch_size=32, model_kwargs={"recurrent": {"cell": "gru", "hidden_size": 8}})


def test_same_seed_same_parameters_and_stop_resume_is_bit_identical(cli_in_process, tmp_path, no_child_left):
    # in this process: the collector is still a process of its own
    def cli(*args, cwd):
        assert cli_in_process(*args, cwd=cwd).returncode == 0

    budget = ["--data.total_timesteps", str(8 * 256), "--trainer.logger", "false"]
    cli("fit", *BASE, *budget, "--trainer.callbacks.init_args.dirpath", "full", cwd=tmp_path)
    cli("fit", *BASE, *budget, "--trainer.callbacks.init_args.dirpath", "part", "--trainer.max_epochs", "3",
        cwd=tmp_path)
    part = torch.load(tmp_path / "part/last.ckpt", weights_only=False)
    assert part["PPODataModule"]["ranks"][0]["behaviour"] is not None  # the weights of the rollout in flight
    cli("fit", *BASE, *budget, "--trainer.callbacks.init_args.dirpath", "part", "--ckpt_path", "last", cwd=tmp_path)
    full = torch.load(tmp_path / "full/last.ckpt", weights_only=False)
    part = torch.load(tmp_path / "part/last.ckpt", weights_only=False)
    assert full["global_step"] == part["global_step"] == 8 * 20
    for key, value in full["state_dict"].items():
        assert torch.equal(value, part["state_dict"][key]), key
    synchronous = tmp_path / "sync"
    cli("fit", *BASE[:-2], *budget, "--trainer.callbacks.init_args.dirpath", "sync", cwd=tmp_path)
    other = torch.load(synchronous / "last.ckpt", weights_only=False)["state_dict"]
    assert not torch.equal(other["policy.actor.0.weight"], full["state_dict"]["policy.actor.0.weight"])


def test_acting_on_the_learner_is_refused_with_overlap(cli_in_process, tmp_path, no_child_left):
    proc = cli_in_process("fit", *BASE, "--model.actor_device", "learner", "--trainer.logger", "false", cwd=tmp_path)
    assert proc.returncode == 2
    assert "model.actor_device: 'learner' does not combine with data.overlap" in proc.stderr
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").rglob("*.ckpt"))


def test_acting_on_cuda_without_one_is_refused_with_advice_overlap_takes(cli_in_process, tmp_path, no_child_left):
    # Before: "Use 'cpu' or 'auto'", and 'auto' was then refused by data.overlap.
    proc = cli_in_process("fit", *BASE, "--model.actor_device", "cuda", "--trainer.accelerator", "cpu",
                          "--trainer.logger", "false", cwd=tmp_path)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("lit_ppo: error:")]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr[-3000:]
    assert "model.actor_device: 'cuda' needs a CUDA learner" in errors[0] and "Use 'cpu'" in errors[0]
    assert "auto" not in errors[0]


def test_an_environment_error_in_the_collector_is_the_synchronous_error(cli, tmp_path):
    args = ["fit", *BASE, "--data.env_id", FAULTY, "--data.total_timesteps", str(10 * 256), "--trainer.logger",
            "false"]
    env = {"LIT_PPO_TEST_RAISE_AT": "100", "LIT_PPO_TEST_FAULTY_SEED": "4"}
    overlapped = cli(*args, cwd=tmp_path, check=False, extra_env=env)  # run_cli: no process may outlive it
    assert overlapped.returncode == 2
    errors = [line for line in overlapped.stderr.splitlines() if line.startswith("lit_ppo: error:")]
    assert len(errors) == 1, overlapped.stderr[-3000:]
    assert "rank 0, sub-environment 3 at its step 100 (environment step 800 of this rank)" in errors[0]
    assert "simulated simulator crash" in errors[0] and "Traceback" not in overlapped.stderr


@pytest.mark.parametrize("sig,group", [(signal.SIGTERM, False), (signal.SIGINT, False), (signal.SIGTERM, True)],
                         ids=["SIGTERM", "SIGINT", "SIGTERM-to-the-group"])
def test_a_signal_saves_at_a_rollout_boundary_and_leaves_no_process(tmp_path, sig, group):
    # to the group: as SLURM and a terminal's Ctrl+C send it, to the collector too
    env = {"PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO)}
    args = ["fit", *BASE, "--data.total_timesteps", str(2000 * 256), "--trainer.logger", "false"]
    proc = subprocess.Popen([sys.executable, "-m", "lit_ppo", *args], cwd=tmp_path, env={**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    last = tmp_path / "runs/cartpole/checkpoints/last.ckpt"
    wait_for_file(last, proc)
    time.sleep(0.5)
    if group:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert "saved" in out and "--ckpt_path last" in out and "Traceback" not in out, out
    deadline = time.monotonic() + 5
    while session_processes(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not session_processes(proc.pid)
    state = torch.load(last, weights_only=False)
    assert state["global_step"] % 20 == 0 and state["PPODataModule"]["ranks"][0]["behaviour"] is not None


def test_two_ddp_ranks_each_run_a_collector_in_lockstep(cli, tmp_path):
    cli("fit", *BASE, "--trainer.strategy", "ddp", "--trainer.devices", "2", "--trainer.logger", "false",
        "--data.total_timesteps", str(4 * 512), cwd=tmp_path)
    state = torch.load(tmp_path / "runs/cartpole/checkpoints/last.ckpt", weights_only=False)
    ranks = state["PPODataModule"]["ranks"]
    assert [r["collector"]["iterations"] for r in ranks] == [4, 4]
    assert not torch.equal(ranks[0]["collector"]["next_obs"], ranks[1]["collector"]["next_obs"])  # own envs


def test_a_killed_learner_takes_its_collector_with_it(tmp_path):
    args = ["fit", *BASE, "--data.total_timesteps", str(2000 * 256), "--trainer.logger", "false"]
    proc = subprocess.Popen([sys.executable, "-m", "lit_ppo", *args], cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(REPO)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wait_for_file(tmp_path / "runs/cartpole/checkpoints/last.ckpt", proc)
    assert len(session_processes(proc.pid)) >= 2  # the learner and its collector
    proc.kill()  # SIGKILL: no handler, no teardown
    proc.wait()
    deadline = time.monotonic() + 10
    while (left := session_processes(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for p in left:
        p.kill()
    assert not left, [p.cmdline() for p in left]


def test_a_killed_collector_with_async_envs_is_one_line(tmp_path):
    # Before: the collector's env workers printed their broken pipes' tracebacks, and the resource tracker warned of
    # the collector's leaked semaphores (its workers were spawned, with named ones), around the one error line.
    import psutil

    args = ["fit", *BASE, "--data.total_timesteps", str(2000 * 256), "--trainer.logger", "false",
            "--data.vectorization", "async", "--data.num_envs", "2", "--data.minibatch_size", "64"]
    proc = subprocess.Popen([sys.executable, "-m", "lit_ppo", *args], cwd=tmp_path,
                            env=dict(os.environ, PYTHONPATH=str(REPO), PYTHONUNBUFFERED="1"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        wait_for_file(tmp_path / "runs/cartpole/checkpoints/last.ckpt", proc)
        children = psutil.Process(proc.pid).children()
        [collector] = [p for p in children if "resource_tracker" not in " ".join(p.cmdline())]
        assert len(collector.children()) == 2  # its env workers
        collector.kill()
        _, err = proc.communicate(timeout=60)
    finally:
        for left in session_processes(proc.pid):
            left.kill()
    errors = [line for line in err.splitlines() if line.startswith("lit_ppo: error:")]
    assert proc.returncode == 2 and len(errors) == 1, err[-3000:]
    assert "the collector process of rank 0 ended (exit code -9)" in errors[0]
    for noise in ("Traceback", "leaked semaphore", "Broken pipe"):
        assert noise not in err, err[-3000:]


def test_the_default_kl_stop_with_cleanbas_clip_is_warned_of_and_not_with_decoupled_ppo(cli_in_process, tmp_path,
                                                                                       no_child_left):
    # Cleanba's clip with the default KL stop learned far less on Pendulum than either without the stop or decoupled
    fit = ["fit", "--data.overlap", "true", "--data.num_steps", "16", "--data.minibatch_size", "16",
           "--data.total_timesteps", "128", "--trainer.logger", "false", "--trainer.enable_progress_bar", "false",
           "--trainer.enable_checkpointing", "false"]
    with pytest.warns(UserWarning, match="model.target_kl 0.02 with data.overlap .* model.decoupled: true"):
        assert cli_in_process(*fit, cwd=tmp_path).returncode == 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cli_in_process(*fit, "--model.decoupled", "true", cwd=tmp_path).returncode == 0
    assert not [w for w in caught if "model.target_kl" in str(w.message)]


def test_the_collector_process_imports_no_lightning():
    # A spawned collector imports its target's module and what its arguments' classes need; Lightning's import
    # would add seconds to every start (lit_ppo/collection/overlap/worker.py).
    code = ("import sys, lit_ppo.collection.overlap.worker, lit_ppo.collection.recipe; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('lightning', 'pytorch_lightning')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO).stdout
    assert out.strip() == "[]"

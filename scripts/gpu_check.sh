#!/usr/bin/env bash
# GPU checks for lit_ppo, for a CUDA machine (CI has none). Run from the repository root after installing the
# package (with the machine's own CUDA build of torch).
#   bash scripts/gpu_check.sh [OUTPUT_DIR] [all|fits|tests|profiles|profiles-cnn|overlap]
# Parts: fits = each precision's short CartPole fit (16-mixed, bf16-mixed, 32-true) with its last logged values,
# validation of its checkpoint, a GPU checkpoint validated and resumed on the CPU, DDP on all visible GPUs when
# there are several; tests = tests/test_hardware.py and the compile parity tests (the CUDA tests included);
# profiles = the device-choice table for the MLPs; profiles-cnn = its Nature-CNN row (when ale-py is installed);
# overlap = data.overlap's arm (a CPU collector process beside the CUDA learner) against both serial placements for
# the 1024-unit MLP and the Nature CNN, plus an overlapped CUDA fit. On one H200 with 16 cores
# (2026-11-30) the fits took ~7 minutes and everything ~11: more than one 10-minute call, hence the parts.
set -uo pipefail
export PYTHONUNBUFFERED=1
out=${1:-gpu_check_out}
part=${2:-all}
case "$part" in all|fits|tests|profiles|profiles-cnn|overlap) ;; *) echo "unknown part '$part': all, fits, tests, profiles, profiles-cnn or overlap" >&2; exit 2;; esac
want() { [ "$part" = all ] || [ "$part" = "$1" ]; }
mkdir -p "$out"
status=0
run() { echo; echo "\$ $*"; "$@" || { echo "FAILED ($?): $*"; status=1; }; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
python -c "import torch, lightning; print('torch', torch.__version__, 'lightning', lightning.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.device_count())"

last_row() {  # the last rollout row of a CSV run: return, value loss, KL, SPS
  python - "$1" <<'PY'
import csv, glob, sys
[path] = glob.glob(f"{sys.argv[1]}/*/version_*/metrics.csv")
rows = [r for r in csv.DictReader(open(path)) if r.get("time/env_steps")]
r = rows[-1]
print(f"  iterations={len(rows)} env_steps={r['time/env_steps']} return_mean={r['rollout/return_mean']} "
      f"losses/value={r['losses/value']} approx_kl={r['stats/approx_kl']} sps={float(r['time/sps']):.0f}")
PY
}

if want fits; then
  for precision in 16-mixed bf16-mixed 32-true; do
    run python -m lit_ppo fit --config cartpole.yaml --trainer.accelerator gpu --trainer.devices 1 \
      --trainer.precision "$precision" --data.total_timesteps 51200 --trainer.enable_progress_bar false \
      --trainer.logger lightning.pytorch.loggers.CSVLogger --trainer.logger.save_dir "$out/fit_$precision" \
      --trainer.callbacks.init_args.dirpath "$out/fit_$precision/ckpt"
    last_row "$out/fit_$precision"
    run python -m lit_ppo validate --config cartpole.yaml --trainer.accelerator gpu --trainer.devices 1 \
      --trainer.logger false --ckpt_path "$out/fit_$precision/ckpt/last.ckpt"
  done

  # A checkpoint written on the GPU must load where there is none: validate it, and resume it, on the CPU.
  run python -m lit_ppo validate --config cartpole.yaml --trainer.accelerator cpu --trainer.logger false \
    --ckpt_path "$out/fit_16-mixed/ckpt/last.ckpt"
  run python -m lit_ppo fit --config cartpole.yaml --trainer.accelerator cpu --data.total_timesteps 61440 \
    --trainer.enable_progress_bar false --trainer.logger false --trainer.callbacks.init_args.dirpath "$out/resume_cpu" \
    --ckpt_path "$out/fit_16-mixed/ckpt/last.ckpt"

  gpus=$(python -c "import torch; print(torch.cuda.device_count())")
  if [ "$gpus" -gt 1 ]; then
    run python -m lit_ppo fit --config cartpole.yaml --trainer.accelerator gpu --trainer.devices "$gpus" \
      --trainer.strategy ddp --data.total_timesteps 51200 --trainer.enable_progress_bar false \
      --trainer.logger lightning.pytorch.loggers.CSVLogger --trainer.logger.save_dir "$out/ddp" \
      --trainer.callbacks.init_args.dirpath "$out/ddp/ckpt"
    last_row "$out/ddp"
  else
    echo; echo "one GPU visible: DDP across GPUs not run (the CPU DDP tests cover the code path)"
  fi
fi

want tests && run python -m pytest -q tests/test_hardware.py tests/test_acting.py tests/test_updates.py

if want profiles; then
  # The device-choice table (docs/notebook/performance.md): the CartPole MLPs of 64, 256 and 1024 units, each placement,
  # model.compile off and on, the 1024-unit MLP also at bf16-mixed and 16-mixed. 26 short fits on a GPU machine;
  # the CNN row is its own part (profiles-cnn) so that each stays within one 10-minute device call.
  run python -m lit_ppo profile --rows mlp64 mlp256 mlp1024 --iterations 5 \
    --placements all-cpu cpu-act/gpu-learn all-gpu-act | tee "$out/profile_table.txt"
fi
if want profiles-cnn; then
  if python -c "import ale_py" 2>/dev/null; then
    run python -m lit_ppo profile --rows cnn --iterations 4 --placements all-cpu cpu-act/gpu-learn all-gpu-act \
      | tee "$out/profile_cnn.txt"
  else
    echo; echo "ale-py not installed: no CNN row (pip install -e '.[atari]')"
  fi
fi
if want overlap; then
  # The case data.overlap exists for: learning on the GPU while the CPU collects. Against both serial placements.
  run python -m lit_ppo fit --config cartpole.yaml --trainer.accelerator gpu --trainer.devices 1 --data.overlap true \
    --data.total_timesteps 51200 --trainer.enable_progress_bar false \
    --trainer.logger lightning.pytorch.loggers.CSVLogger --trainer.logger.save_dir "$out/fit_overlap" \
    --trainer.callbacks.init_args.dirpath "$out/fit_overlap/ckpt"
  last_row "$out/fit_overlap"
  rows="mlp1024"
  python -c "import ale_py" 2>/dev/null && rows="mlp1024 cnn"
  run python -m lit_ppo profile --rows $rows --compile off --iterations 6 \
    --placements cpu-act/gpu-learn all-gpu-act overlap/gpu-learn | tee "$out/profile_overlap.txt"
fi
exit $status

#!/usr/bin/env bash
# GPU checks for lit_ppo, for a CUDA machine (CI has none). Run from the repository root after installing the
# package (with the machine's own CUDA build of torch).
#   bash scripts/gpu_check.sh [OUTPUT_DIR] [all|fits|tests|profiles]
# Parts: fits = each precision's short CartPole fit (16-mixed, bf16-mixed, 32-true) with its last logged values,
# validation of its checkpoint, a GPU checkpoint validated and resumed on the CPU, DDP on all visible GPUs when
# there are several; tests = tests/test_hardware.py (the CUDA tests included); profiles = the placement profile for
# a small MLP, a wide MLP and the Nature-CNN policy (when ale-py is installed). On one H200 with 16 cores
# (2026-11-30) the fits took ~7 minutes and everything ~11: more than one 10-minute call, hence the parts.
set -uo pipefail
export PYTHONUNBUFFERED=1
out=${1:-gpu_check_out}
part=${2:-all}
case "$part" in all|fits|tests|profiles) ;; *) echo "unknown part '$part': all, fits, tests or profiles" >&2; exit 2;; esac
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

want tests && run python -m pytest -q tests/test_hardware.py

if want profiles; then
  run python -m lit_ppo profile --config cartpole.yaml --iterations 10
  run python -m lit_ppo profile --config cartpole.yaml --iterations 10 --model.hidden_sizes "[1024, 1024]"
  if python -c "import ale_py" 2>/dev/null; then
    run python -m lit_ppo profile --config breakout.yaml --iterations 4
  else
    echo; echo "ale-py not installed: no CNN profile (pip install -e '.[atari]')"
  fi
fi
exit $status

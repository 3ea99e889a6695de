#!/usr/bin/env bash
# device = cuda through the real binary. Without a GPU (or in a CPU-only build): a clear
# usage error (exit 2) on every rank, for train and for bench allreduce, and device = auto
# trains on the CPU. With GPUs: a training on the GPU reaches its accuracy, the image models
# (cnn with batch norm and dropout, resnet) learn on one GPU as they do on CPU ranks
# (cnn_accuracy.sh's steps and thresholds), and two ranks on one GPU are refused with a
# message naming them. reduction = invariant learns on a GPU, and at 1 and 2 GPUs gives the
# same bits. on_failure = shrink on a GPU is refused (exit 2) saying what is missing; with
# MIRRORED_UNVERIFIED_GPU_SHRINK=1 (a ULFM build, 2 GPUs) 2 GPUs that lose one end with the
# 1-GPU bits. Multi-GPU NCCL (training, invariant mode, shrink) is checked only where this
# test runs on a machine with 2 or more GPUs: until one has, it is unverified.
source "$(dirname "$0")/lib.sh"
require_data
gpus=$("$MIRRORED" info | sed -nE 's/.*\(([0-9]+) GPU\(s\) visible.*/\1/p' | head -1)
gpus=${gpus:-0}
common=(--config "$SOURCE_DIR/launch/configs/fmnist_mlp.ini" --data.train "$DATA_DIR/train.h5"
        --data.test "$DATA_DIR/test.h5")

if [[ $gpus -eq 0 ]]; then
  expect_failure train_cuda_without_gpu "has no usable GPU" 30 2 train "${common[@]}" --device cuda --out "$WORK/a"
  expect_failure bench_cuda_without_gpu "has no usable GPU" 30 2 bench allreduce --device cuda --max_bytes 4096
  # The device override: an index beyond what is visible, and a malformed one, are usage
  # errors (exit 2) naming the variable, not a CUDA error at the first kernel.
  MIRRORED_CUDA_DEVICE=0 expect_exit 2 override_without_gpu "MIRRORED_CUDA_DEVICE=0 but 0 GPU(s) are visible" 30 1 \
    train "${common[@]}" --device cuda --out "$WORK/o1"
  MIRRORED_CUDA_DEVICE=first expect_exit 2 override_malformed "MIRRORED_CUDA_DEVICE='first': expected a non-negative" \
    30 1 train "${common[@]}" --device cuda --out "$WORK/o2"
  CUDA_VISIBLE_DEVICES= expect_exit 2 no_visible_device "has no usable GPU" 30 1 \
    train "${common[@]}" --device cuda --out "$WORK/o3"
  # The prefix "mirrored: error [rank r/n on host]: " appears once per error line.
  grep -h 'mirrored: error' "$WORK"/override_*.out "$WORK"/train_cuda_without_gpu.out | while read -r line; do
    [[ $(grep -o ' on [^]:]*\]' <<<"$line" | wc -l) -eq 1 ]] || fail "rank/host printed more than once: $line"
  done
  mpirun_np 1 train "${common[@]}" --device auto --max_steps 20 --epochs 1 --out "$WORK/auto" >"$WORK/auto.log"
  grep -qE '^0 +[^ ]+ +0 +0 +cpu$' "$WORK/auto.log" || { cat "$WORK/auto.log"; fail "device = auto: rank 0 not on the cpu"; }
  # The default is auto, and it says what it chose at start-up.
  mpirun_np 1 train "${common[@]}" --max_steps 5 --epochs 1 --out "$WORK/default" >"$WORK/default.log"
  # Without an NVIDIA driver, one line in mirrored's words (not CUDA's "driver version is
  # insufficient"); a driver without a usable GPU names the reason.
  grep -qE "^no NVIDIA driver: training on the CPU$|device = auto: no usable GPU on rank 0 \(.*\); computing on the CPU" \
    "$WORK/default.log" || { cat "$WORK/default.log"; fail "the default device = auto did not say that it computes on the CPU"; }
  ! grep -qi "insufficient" "$WORK/default.log" || { cat "$WORK/default.log"; fail "CUDA's own words at start-up"; }
  echo "ok: no GPU here; device = cuda refused clearly, device = auto ran on the CPU"
  exit 0
fi

mpirun_np 1 train "${common[@]}" --device cuda --epochs 1 --out "$WORK/gpu1" | tee "$WORK/gpu1.log"
acc=$(json_field "$WORK/gpu1/metrics.jsonl" eval test_accuracy)
awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' || fail "GPU training: test accuracy $acc < 0.80"
grep -q "cuda:0" "$WORK/gpu1.log" || fail "cluster table does not show cuda:0"
data=(--data.train "$DATA_DIR/train.h5" --data.test "$DATA_DIR/test.h5")
mpirun_np 1 train --config "$SOURCE_DIR/launch/configs/fmnist_cnn.ini" "${data[@]}" --device cuda --epochs 1 \
  --max_steps 150 --model.dropout 0.2 --out "$WORK/gpu_cnn" >"$WORK/gpu_cnn.log"
mpirun_np 1 train --config "$SOURCE_DIR/launch/configs/fmnist_resnet.ini" "${data[@]}" --device cuda --epochs 1 \
  --max_steps 80 --resnet.channels 8,16,32 --out "$WORK/gpu_resnet" >"$WORK/gpu_resnet.log"
cnn=$(json_field "$WORK/gpu_cnn/metrics.jsonl" eval test_accuracy)
resnet=$(json_field "$WORK/gpu_resnet/metrics.jsonl" eval test_accuracy)
awk -v a="$cnn" 'BEGIN { exit !(a >= 0.80) }' || fail "GPU cnn: test accuracy $cnn < 0.80"
awk -v a="$resnet" 'BEGIN { exit !(a >= 0.55) }' || fail "GPU resnet: test accuracy $resnet < 0.55"
if [[ $gpus -ge 2 ]]; then
  mpirun_np 2 train "${common[@]}" --device cuda --epochs 1 --out "$WORK/gpu2" >"$WORK/gpu2.log"
  acc2=$(json_field "$WORK/gpu2/metrics.jsonl" eval test_accuracy)
  awk -v a="$acc2" 'BEGIN { exit !(a >= 0.80) }' || fail "2-GPU training: test accuracy $acc2 < 0.80"
else
  expect_failure shared_gpu "would share one GPU" 60 2 train "${common[@]}" --device cuda --out "$WORK/shared"
fi
# reduction = invariant over NCCL: it learns on one GPU, and 1 and 2 GPUs end with the same bits.
invariant=(--reduction invariant --reduction.shards 4 --epochs 1 --max_steps 100)
mpirun_np 1 train "${common[@]}" --device cuda "${invariant[@]}" --out "$WORK/inv1" >"$WORK/inv1.log"
inv_acc=$(json_field "$WORK/inv1/metrics.jsonl" eval test_accuracy)
awk -v a="$inv_acc" 'BEGIN { exit !(a >= 0.75) }' || fail "GPU invariant training: test accuracy $inv_acc < 0.75"
if [[ $gpus -ge 2 ]]; then
  mpirun_np 2 train "${common[@]}" --device cuda "${invariant[@]}" --out "$WORK/inv2" >"$WORK/inv2.log"
  "$COMPARE" "$WORK/inv1/final.h5" "$WORK/inv2/final.h5" --exact ||
    fail "reduction = invariant: 1 and 2 GPUs end with different parameters"
fi
# on_failure = shrink on a GPU has never run: refused at start-up, saying what is missing.
# (Without mpirun: under it, an Open MPI job without --with-ft ulfm is refused first.)
status=0
timeout 60 "$MIRRORED" train "${common[@]}" --device cuda --on_failure shrink --max_steps 5 --out "$WORK/shrink_refused" \
  >"$WORK/gpu_shrink_refused.out" 2>&1 || status=$?
[[ $status -eq 2 ]] || { cat "$WORK/gpu_shrink_refused.out"; fail "on_failure = shrink on a GPU: exit $status, expected 2"; }
grep -q "on_failure = shrink with device = cuda has never run on GPUs" "$WORK/gpu_shrink_refused.out" &&
  grep -q "MIRRORED_UNVERIFIED_GPU_SHRINK=1" "$WORK/gpu_shrink_refused.out" ||
  { cat "$WORK/gpu_shrink_refused.out"; fail "the shrink refusal does not say what is missing and how to run it anyway"; }
echo "ok: on_failure = shrink on a GPU refused, exit 2: $(grep -m1 -o 'on_failure = shrink with device = cuda[^:]*' "$WORK/gpu_shrink_refused.out")"
# With the opt-in, over NCCL (2 GPUs or more, a ULFM build): rank 1 killed after step 20;
# rank 0 aborts the NCCL communicator, goes on alone and ends with the 1-GPU run's bits.
if [[ $gpus -ge 2 ]] && grep -q "^  ulfm  *available (" <<<"$("$MIRRORED" info 2>/dev/null)"; then
  MIRRORED_UNVERIFIED_GPU_SHRINK=1 timeout -k 5 300 mpirun --with-ft ulfm --allow-run-as-root --oversubscribe \
    --bind-to none -x MIRRORED_UNVERIFIED_GPU_SHRINK -np 2 "$MIRRORED" train \
    "${common[@]}" --device cuda "${invariant[@]}" --on_failure shrink --collective_timeout_s 20 --out "$WORK/shrink" \
    >"$WORK/shrink.log" 2>&1 &
  job=$!
  kill_rank_at_step "$WORK/shrink" 20 1
  wait "$job" || { cat "$WORK/shrink.log"; fail "on_failure = shrink on GPUs: the job exited non-zero after rank 1 died"; }
  grep -q '"kind": "membership".*"world_size": 1' "$WORK/shrink/metrics.jsonl" ||
    { cat "$WORK/shrink.log"; fail "on_failure = shrink on GPUs: no membership record with world_size 1"; }
  "$COMPARE" "$WORK/inv1/final.h5" "$WORK/shrink/final.h5" --exact ||
    fail "on_failure = shrink on GPUs: the run that lost rank 1 differs from the 1-GPU run"
  echo "ok: GPU rank 1 killed at step 20: rank 0 went on alone, final.h5 equal to the 1-GPU run's"
fi
MIRRORED_CUDA_DEVICE=$gpus expect_exit 2 override_beyond_visible "MIRRORED_CUDA_DEVICE=$gpus but" 60 1 \
  train "${common[@]}" --device cuda --out "$WORK/beyond"
CUDA_VISIBLE_DEVICES= expect_exit 2 no_visible_device "has no usable GPU" 60 1 \
  train "${common[@]}" --device cuda --out "$WORK/hidden"
echo "ok: GPU training reached $acc (mlp), $cnn (cnn), $resnet (resnet)"

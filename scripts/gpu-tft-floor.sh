#!/usr/bin/env bash
# On the GPU machine (no cargo): issue #42 item 3, the TFT near its floor.
# Carried in .devicez/ (ignored), built beforehand with ../shared/gpu/build-cuda.sh:
#   .devicez/gate.xz    the stock gate, --features cuda
#   .devicez/gpu-*.xz   tests/gpu.rs (SlicedAdamW and the checkpointed TFT on CUDA)
# Output under $OUT: each step's log and report; one summary line a step.
OUT=${OUT:-target/gpu-tft-floor}
. "$(dirname "$0")/gpu-common.sh"
step gpu_tests env GATE_BIN="$G" .device/gpu-* --test-threads 1 sliced_adamw checkpointed_tft
# budgets.yaml's TFT (chunk 64, AdamW in slices) and its plain reference,
# step_time_ratio in 15 interleaved pairs.
step tft "$G" check --backend cuda --only tft --baseline none --out "$OUT/tft"
# The chunk on the H200: training peak against step-time ratio.
step chunks "$G" check --backend cuda --budgets scripts/gpu-tft-chunks.yaml --baseline none --out "$OUT/chunks"
tail -n 25 "$OUT/tft.log" "$OUT/chunks.log"; tail -n 3 "$OUT/gpu_tests.log"

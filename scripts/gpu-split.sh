#!/usr/bin/env bash
# On the GPU machine (no cargo), 2026-12-06 (fourteenth session): issue #53
# item 1, the checkpointed TFT with its encoder selection split
# (crates/gate-builtins/src/tft/selection.rs) against the binary before it,
# on one card in one call. Carried in .devicez/ (ignored), built beforehand
# with ../shared/gpu/build-cuda.sh:
#   .devicez/gate.xz      the stock gate of this tree, --features cuda
#   .devicez/gate-old.xz  the same of the commit before the split
#   .devicez/gpu-*.xz     tests/gpu.rs (the checkpointed TFT's gradients on CUDA)
# Output under $OUT: each step's log and report; one summary line a step.
OUT=${OUT:-target/gpu-split}
. "$(dirname "$0")/gpu-common.sh"
OLD=$(realpath .device/gate-old)
step gpu_tests env GATE_BIN="$G" .device/gpu-* --test-threads 1 checkpointed_tft sliced_adamw device_dropout
# budgets.yaml's TFT (chunk 64) and its plain reference, step_time_ratio in
# 15 interleaved pairs: the binary before and after, alternating.
for i in 1 2 3; do
  step old$i "$OLD" check --backend cuda --only tft --baseline none --out "$OUT/old$i"
  step new$i "$G" check --backend cuda --only tft --baseline none --out "$OUT/new$i"
done
# Chunks 64, 96 and 128, each against its own plain model.
step split "$G" check --backend cuda --budgets scripts/gpu-tft-split.yaml --baseline none --out "$OUT/split"
# The repository's gate, every component.
step check "$G" check --backend cuda --baseline none --out "$OUT/check"
step old_split "$OLD" check --backend cuda --budgets scripts/gpu-tft-split.yaml --baseline none --out "$OUT/old_split"
for f in old1 new1 old2 new2 old3 new3 split check old_split; do
  echo "== $f"; grep -E "training_peak|step_time_ratio|PASS|FAIL" "$OUT/$f.log" | head -12
done
tail -n 5 "$OUT/gpu_tests.log"

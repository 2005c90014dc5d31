#!/usr/bin/env bash
# On the GPU machine (no cargo), 2026-12-07 (sixteenth session): issue #53
# items 1 and 2 with the checkpointed TFT's encoder LSTM taped
# (crates/gate-builtins/src/tft/lstm.rs), against the binary before it, on
# one card in one call. Carried, built beforehand with
# scripts/build-cuda.sh (CUDA_COMPUTE_CAP=90) and xz'd:
#   .devicez/gate.xz      the stock gate of this tree, --features cuda (built
#                         from b0d07e1, 2026-12-07 seventeenth session: the
#                         LSTM a gate::checkpoint::TapedBlock; the first
#                         build, of 2781e7a, never reached a card)
#   .devicez/gate-old.xz  the same of 9a261bf, the commit before the taped LSTM
#   .devicez/gpu-*.xz     tests/gpu.rs (the checkpointed TFT's gradients on CUDA)
# and .whl/ (the peer's wheels, docs/peer.md).
# Output: $OUT/gpu-lstm.tgz (every step's log and report), a line a step.
FINAL=${OUT:-target/gpu-lstm}
mkdir -p "$FINAL"
OUT=/tmp/gpu-lstm-work PACK=$(cd "$FINAL" && pwd)/gpu-lstm.tgz
. "$(dirname "$0")/gpu-common.sh"
# gate-old is optional: a call that only samples the tree as it stands
# (2026-12-07, nineteenth session) carries the stock gate alone, and the
# `old` steps are left out.
OLD=""
[ -x .device/gate-old ] && OLD=$(realpath .device/gate-old)
old_step() { if [ -n "$OLD" ]; then step "$@"; fi; }
# Whether a kernel profiler is there, for a later call that counts launches.
{ command -v nsys ncu nvprof; nvidia-smi -L; } > "$OUT/tools.txt" 2>&1
step gpu_tests env GATE_BIN="$G" .device/gpu-* --test-threads 1 checkpointed_tft sliced_adamw device_dropout
# budgets.yaml's TFT and its plain reference, step_time_ratio in 15
# interleaved pairs: the binary before and after, alternating; the peer
# (pytorch-forecasting 1.8.0) after the first pair, so a call cut off at
# its limit still brings back items 1 and 2 (each step is packed as it ends).
step new1 "$G" check --backend cuda --only tft --baseline none --out "$OUT/new1"
old_step old1 "$OLD" check --backend cuda --only tft --baseline none --out "$OUT/old1"
step peer python3 scripts/peer-tft.py --wheels .whl --gate "$G" --out "$OUT/peer" --plain
for i in 2 3; do
  step new$i "$G" check --backend cuda --only tft --baseline none --out "$OUT/new$i"
  old_step old$i "$OLD" check --backend cuda --only tft --baseline none --out "$OUT/old$i"
done
# The repository's gate, every component.
step check "$G" check --backend cuda --baseline none --out "$OUT/check"
# Where a card has Nsight Systems: the TFT's kernels counted and timed (the
# launches the taped LSTM was written to save are counted from the code so
# far, not measured). The per-kernel summary only; the trace stays there.
if command -v nsys >/dev/null 2>&1; then
  step nsys nsys profile --trace=cuda --stats=true --force-overwrite=true -o /tmp/tft-nsys \
    "$G" check --backend cuda --only tft --baseline none --out "$OUT/nsys-check"
fi
for f in old1 new1 old2 new2 old3 new3 check; do
  [ -f "$OUT/$f.log" ] || continue
  echo "== $f"; grep -E "training_peak|step_time_ratio|^  tft|PASS|FAIL" "$OUT/$f.log" | head -12
done
echo "== peer"; tail -n 25 "$OUT/peer.log"
tail -n 5 "$OUT/gpu_tests.log"

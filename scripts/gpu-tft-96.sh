#!/usr/bin/env bash
# On the GPU machine (no cargo), 2026-12-06 (fourteenth session), after
# scripts/gpu-split.sh: issue #53 items 1 and 2 with budgets.yaml's TFT at
# chunk 96 (the split selection). Carried: .devicez/ (as gpu-split.sh) and
# .whl/ (the peer's wheels, docs/peer.md).
# Output: $OUT/gpu-tft-96.tgz (every step's log and report), a line a step.
FINAL=${OUT:-target/gpu-tft-96}
mkdir -p "$FINAL"
OUT=/tmp/gpu-tft-96-work PACK=$(cd "$FINAL" && pwd)/gpu-tft-96.tgz
. "$(dirname "$0")/gpu-common.sh"
# The checkpointed TFT's gradients on the card, and AdamW in slices.
step gpu_tests env GATE_BIN="$G" .device/gpu-* --test-threads 1 checkpointed_tft sliced_adamw device_dropout
# The repository's TFT and its plain reference, 15 interleaved pairs a run.
for i in 1 2 3 4 5; do
  step tft$i "$G" check --backend cuda --only tft --baseline none --out "$OUT/tft$i"
done
# Against the peer, in the same call (pytorch-forecasting 1.8.0).
step peer python3 scripts/peer-tft.py --wheels .whl --gate "$G" --out "$OUT/peer" --plain
# The repository's gate, every component.
step check "$G" check --backend cuda --baseline none --out "$OUT/check"
for f in tft1 tft2 tft3 tft4 tft5 check; do
  echo "== $f"; grep -E "training_peak|step_time_ratio|^  tft|PASS|FAIL" "$OUT/$f.log" | head -8
done
echo "== peer"; tail -n 25 "$OUT/peer.log"
tail -n 5 "$OUT/gpu_tests.log"

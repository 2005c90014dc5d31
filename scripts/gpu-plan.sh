#!/usr/bin/env bash
# On the GPU machine (no cargo): issue #55, plans and the TFT's recompute on
# the card, and the release gate. Carried in .devicez/ (ignored), built
# beforehand with scripts/build-cuda.sh (`--bin gate --test gpu`):
#   .devicez/gate.xz    the stock gate, --features cuda
#   .devicez/gpu-*.xz   tests/gpu.rs
# Output under $OUT: one archive of every step's log, report and plan.json
# (the device returns few files); one summary line a step.
FINAL=${OUT:-target/gpu-plan}
mkdir -p "$FINAL"
OUT=/tmp/gpu-plan-work PACK=$(cd "$FINAL" && pwd)/gpu-plan.tgz
. "$(dirname "$0")/gpu-common.sh"
"$G" --version > "$OUT/version.txt" 2>&1
# In the order that matters most, each step packed as it ends (PACK): a
# call cut off at the device's limit brings back what finished; ONLY="a b"
# runs the named steps in a later call.
# Item 1: the plan from the TFT's plain model, under 180 MiB at < 1.3x the
# plain step: what it proposes, each measured candidate's predicted against
# measured bytes and ratio, and whether any configuration passes both.
step plan "$G" plan tft --budgets scripts/gpu-plan-tft.yaml --backend cuda --out "$OUT/plan"
# Item 2: budgets.yaml's TFT (chunk 64, AdamW in slices), three runs of 15
# interleaved pairs each (the third is the peer script's), then the chunk table.
step tft1 "$G" check --backend cuda --only tft --baseline none --out "$OUT/tft1"
# Item 3: pytorch-forecasting's TFT and gate's in the same call (docs/peer.md).
step peer python3 .whl/peer-tft.py --wheels .whl --gate "$G" --out "$OUT/peer" --plain
# Item 5: the release gate with a baseline from the same card, and tests/gpu.rs.
step base "$G" check --backend cuda --out "$OUT/base"
step release "$G" check --strict --backend cuda --emulate-capacity --baseline "$OUT/base/report.json" --out "$OUT/release"
if ls .device/gpu-* >/dev/null 2>&1; then
  step gpu_tests env GATE_BIN="$G" .device/gpu-* --test-threads 1
fi
step tft2 "$G" check --backend cuda --only tft --baseline none --out "$OUT/tft2"
step chunks "$G" check --backend cuda --budgets scripts/gpu-tft-chunks.yaml --baseline none --out "$OUT/chunks"
# #49's sweep on the card: batch × encoder length × dtype, one point re-measured.
step sweep "$G" plan tft --sweep --backend cuda --batches 8,16,32,64 --seq-lens 30,60,120 --dtypes f32,bf16 \
  --capacity 80GiB --out "$OUT/sweep"
for f in plan tft1 peer release gpu_tests tft2 chunks sweep; do
  [ -f "$OUT/$f.log" ] && { echo "== $f"; tail -n 25 "$OUT/$f.log"; }
done
cat "$OUT/steps.txt"

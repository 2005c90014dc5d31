#!/usr/bin/env bash
# On the GPU machine (no cargo): issue #55, plans and the TFT's recompute on
# the card, and the release gate. Carried in .devicez/ (ignored), built
# beforehand with scripts/build-cuda.sh (`--bin gate --test gpu`):
#   .devicez/gate.xz    the stock gate, --features cuda
#   .devicez/gpu-*.xz   tests/gpu.rs
# Output under $OUT: one archive of every step's log, report and plan.json
# (the device returns few files); one summary line a step.
OUT=${OUT:-target/gpu-plan}
. "$(dirname "$0")/gpu-common.sh"
"$G" --version > "$OUT/version.txt" 2>&1
# Two calls of the device's ten minutes each:
#   ONLY="plan tft1 tft2 chunks" scripts/gpu-plan.sh
#   ONLY="peer base release gpu_tests sweep" scripts/gpu-plan.sh
# Item 1: the plan from the TFT's plain model, under 180 MiB at < 1.3x the
# plain step: what it proposes, each measured candidate's predicted against
# measured bytes and ratio, and whether any configuration passes both.
step plan "$G" plan tft --budgets scripts/gpu-plan-tft.yaml --backend cuda --out "$OUT/plan"
# Item 2: budgets.yaml's TFT (chunk 64, AdamW in slices), three runs of 15
# interleaved pairs each (the third is the peer script's), then the chunk table.
for i in 1 2; do
  step "tft$i" "$G" check --backend cuda --only tft --baseline none --out "$OUT/tft$i"
done
step chunks "$G" check --backend cuda --budgets scripts/gpu-tft-chunks.yaml --baseline none --out "$OUT/chunks"
# Item 3: pytorch-forecasting's TFT and gate's in the same call (docs/peer.md).
step peer python3 .whl/peer-tft.py --wheels .whl --gate "$G" --out "$OUT/peer" --plain
# Item 5: the release gate with a baseline from the same card, and tests/gpu.rs.
step base "$G" check --backend cuda --out "$OUT/base"
step release "$G" check --strict --backend cuda --emulate-capacity --baseline "$OUT/base/report.json" --out "$OUT/release"
if ls .device/gpu-* >/dev/null 2>&1; then
  step gpu_tests env GATE_BIN="$G" .device/gpu-* --test-threads 1
fi
# #49's sweep on the card: batch × encoder length × dtype, one point re-measured.
step sweep "$G" plan tft --sweep --backend cuda --batches 8,16,32,64 --seq-lens 30,60,120 --dtypes f32,bf16 \
  --capacity 80GiB --out "$OUT/sweep"
for f in plan tft1 tft2 chunks peer release gpu_tests sweep; do
  [ -f "$OUT/$f.log" ] && { echo "== $f"; tail -n 30 "$OUT/$f.log"; }
done
tar -czf /tmp/gpu-plan.tgz -C "$OUT" --exclude="*.svg" . && rm -rf "${OUT:?}"/* && mv /tmp/gpu-plan.tgz "$OUT/"

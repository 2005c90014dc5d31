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
# Item 1: the plan from the TFT's plain model, under 180 MiB at < 1.3x the
# plain step: what it proposes, each measured candidate's predicted against
# measured bytes and ratio, and whether any configuration passes both.
step plan "$G" plan tft --budgets scripts/gpu-plan-tft.yaml --backend cuda --out "$OUT/plan"
# Item 2: budgets.yaml's TFT (chunk 64, AdamW in slices), three runs of 15
# interleaved pairs each, then the chunk table.
for i in 1 2 3; do
  step "tft$i" "$G" check --backend cuda --only tft --baseline none --out "$OUT/tft$i"
done
step chunks "$G" check --backend cuda --budgets scripts/gpu-tft-chunks.yaml --baseline none --out "$OUT/chunks"
# Item 5: the release gate with a baseline from the same card, and tests/gpu.rs.
step base "$G" check --backend cuda --out "$OUT/base"
step release "$G" check --strict --backend cuda --emulate-capacity --baseline "$OUT/base/report.json" --out "$OUT/release"
if ls .device/gpu-* >/dev/null 2>&1; then
  step gpu_tests env GATE_BIN="$G" .device/gpu-* --test-threads 1
fi
tail -n 30 "$OUT/plan.log"; tail -n 6 "$OUT"/tft?.log "$OUT/release.log"; tail -n 3 "$OUT/gpu_tests.log" 2>/dev/null
tar -czf /tmp/gpu-plan.tgz -C "$OUT" --exclude="*.svg" . && rm -rf "${OUT:?}"/* && mv /tmp/gpu-plan.tgz "$OUT/"

#!/usr/bin/env bash
# On the GPU machine (no cargo): the CUDA binaries built beforehand with
# ../shared/gpu/build-cuda.sh, xz-compressed into .devicez/ (ignored) and
# carried there, run for issue #44 (docs/gpu.md):
#   .devicez/gate.xz             the stock gate, --features cuda
#   .devicez/gpu-*.xz            tests/gpu.rs
#   .devicez/team_steps-*.xz     tests/team_steps.rs (its CUDA cases)
#   .devicez/h-transformers-*.xz each candle-transformers fixture's harness
# Output under $OUT: each step's log and report; one summary line a step.
OUT=${OUT:-target/gpu-teams-models}
. "$(dirname "$0")/gpu-common.sh"
# Item 2: the team's optimizer and generation loop on the pool.
step team_steps .device/team_steps-* --test-threads 1
# Item 4's tests/gpu.rs.
step gpu_tests env GATE_BIN="$G" .device/gpu-* --test-threads 1
# Item 1: candle-transformers' models, each fixture with its own harness.
for v in 0-11 0-9-1; do
  [ -x ".device/h-transformers-$v" ] || { echo "transformers-$v: no harness carried"; continue; }
  step "transformers-$v" bash -c "cd tests/adopters/transformers-$v && '$G' check --backend cuda --baseline none \
    --harness-bin '$(realpath .device/h-transformers-$v)' --out '$(realpath "$OUT")/transformers-$v'"
done
# Item 4: the release gate with a baseline from the same card.
step base "$G" check --backend cuda --out "$OUT/base"
step release "$G" check --strict --backend cuda --emulate-capacity --baseline "$OUT/base/report.json" --out "$OUT/release"
tail -n 4 "$OUT"/*.log
# One file back: the device tool returns a bounded number of files.
tar -czf /tmp/gpu-teams-models.tgz -C "$OUT" --exclude="*.svg" . && rm -rf "${OUT:?}"/* && mv /tmp/gpu-teams-models.tgz "$OUT/"

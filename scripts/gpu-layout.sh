#!/usr/bin/env bash
# On the GPU machine (no cargo): the tree checked on the card after a
# change of its layout or its wire (2026-12-06, eleventh session: the candle
# adapter moved to crates/gate-sdk, the tests the package gate-tests; twelfth:
# the profile facts declared once, the framework settings of the
# environment, gate init's declaration reader). Carried in .devicez/
# (ignored), built beforehand with ../shared/gpu/build-cuda.sh
# `--release --locked --features cuda --bin gate --test gpu`:
#   .devicez/gate.xz     the stock gate, --features cuda
#   .devicez/gpu-*.xz    tests/gpu.rs, gate-tests' `gpu` test binary
# Output: $OUT/gpu-layout.tgz (every step's log and report), a line a step.
FINAL=${OUT:-target/gpu-layout}
mkdir -p "$FINAL"
OUT=/tmp/gpu-layout-work PACK=$(cd "$FINAL" && pwd)/gpu-layout.tgz
. "$(dirname "$0")/gpu-common.sh"
"$G" --version > "$OUT/version.txt" 2>&1
# The device tests: the SlicedAdamW bit-for-bit and checkpointed-TFT
# gradient cases among them.
for t in .device/gpu-*; do
  [ -x "$t" ] && step gpu_tests env GATE_BIN="$G" "$t" --test-threads 1
done
# The repository's gate on the card, then against itself on the emulated
# 4 GiB card with --strict (the release gate's form).
step check "$G" check --backend cuda --baseline none --out "$OUT/check"
step strict "$G" check --strict --backend cuda --emulate-capacity --baseline "$OUT/check/report.json" --out "$OUT/strict"
for f in gpu_tests check strict; do
  [ -f "$OUT/$f.log" ] && { echo "== $f"; tail -n 25 "$OUT/$f.log"; }
done
python3 - "$OUT/check/report.json" <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
for name, c in r["components"].items():
    m = c.get("metrics", {})
    print(name, {k: m[k]["value"] for k in ("params", "training_peak", "optimizer", "inference_peak") if k in m})
PY

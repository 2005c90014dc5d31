#!/usr/bin/env bash
# The adopters on each candle minor, gated on a CUDA machine by one CUDA
# `gate` (issue #25; docs/gpu.md). The GPU machine has no cargo, so each
# adopter's harness is built beforehand where the toolchain is (with
# `--features cuda`, ../shared/gpu's recipe; candle 0.9 also needs
# CUDARC_CUDA_VERSION=12090 and CUDA_ROOT) and passed with --harness-bin.
#   GATE   the CUDA gate binary                         (default .device/gate)
#   BINS   folder holding h-candle-0-9-1, h-candle-0-10, h-candle-0-11
#          (each adopter's gate-harness)                (default .device)
# Output: $OUT/<adopter>/report.json, junit.xml, its log; a summary line each.
set -uo pipefail
GATE=$(realpath "${GATE:-.device/gate}")
BINS=$(cd "${BINS:-.device}" && pwd)
OUT=${OUT:-target/gpu-adopters}
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for a in candle-0-9-1:tests/adopters/candle-0-9-1 candle-0-10:tests/adopters/candle-0-10 candle-0-11:examples/adopter; do
  name=${a%%:*}; dir=${a#*:}
  echo "=== $name ($dir)"
  (cd "$dir" && "$GATE" check --backend cuda --baseline none --harness-bin "$BINS/h-$name" \
     --out "$OUT/$name") >"$OUT/$name.log" 2>&1
  echo "exit $?"
  tail -n 25 "$OUT/$name.log"
  python3 - "$OUT/$name/report.json" <<'PY' || true
import json, sys
r = json.load(open(sys.argv[1]))
t = r["testbed"]
print("testbed:", t.get("backend"), t.get("device_name"), "candle", t.get("candle_version"))
for name, c in r["components"].items():
    m = c.get("metrics", {})
    fig = {k: round(v["value"] / 2**20, 1) for k, v in m.items() if isinstance(v, dict) and "value" in v and k in ("params", "gradients", "optimizer", "activations", "training_peak", "inference_peak")}
    print(f"  {name}: source={c.get('memory_source', 'exact (allocator or pool)')} MiB={fig}")
print("notes:", r["summary"].get("notes"))
PY
done

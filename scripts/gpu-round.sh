#!/usr/bin/env bash
# On the GPU machine (no cargo), 2026-12-06 (tenth session): #49's
# composition of levers on the card, and #50's `kv_capacity_tokens` checked
# by one decode on the emulated card. Carried in .devicez/ (ignored), built
# beforehand with ../shared/gpu/build-cuda.sh:
#   .devicez/gate.xz                the stock gate, --features cuda
#   .devicez/h-transformers-0-11.xz tests/adopters/transformers-0-11's
#                                   gate-harness, --features cuda
# Output: $OUT/gpu-round.tgz (every step's log and report), a line a step.
FINAL=${OUT:-target/gpu-round}
mkdir -p "$FINAL"
OUT=/tmp/gpu-round-work PACK=$(cd "$FINAL" && pwd)/gpu-round.tgz
. "$(dirname "$0")/gpu-common.sh"
"$G" --version > "$OUT/version.txt" 2>&1
# The plan from the plain TFT under a step-time ceiling no checkpoint
# meets: its measured candidate composes the batch with bf16 (predicted
# 106.9 MiB, measured 935.7 MiB before the composition was mended).
sed 's/step_time_ratio: < 1.3/step_time_ratio: < 1.02/' scripts/gpu-plan-tft.yaml > "$OUT/floor.yaml"
step plan "$G" plan tft --budgets "$OUT/floor.yaml" --backend cuda --measure 2 --out "$OUT/plan"
# The same levers measured one by one and together.
step compose "$G" check --budgets scripts/gpu-compose.yaml --backend cuda --baseline none --out "$OUT/compose"
# candle-transformers' mistral generating on the emulated 4 GiB card, its
# serving capacity checked by a decode at that size.
H=$(realpath .device/h-transformers-0-11)
step capacity bash -c "cd tests/adopters/transformers-0-11 && '$G' check --backend cuda --emulate-capacity \
  --only mistral_gen --baseline none --harness-bin '$H' --out '$OUT/capacity'"
# And on a card the spec says holds 64 GiB of the H100's 80 GB.
sed 's/capacity: 4 GiB/capacity: 64 GiB/' tests/adopters/transformers-0-11/budgets.yaml \
  > tests/adopters/transformers-0-11/budgets-64g.yaml
step capacity64 bash -c "cd tests/adopters/transformers-0-11 && '$G' check --budgets budgets-64g.yaml --backend cuda \
  --emulate-capacity --only mistral_gen --baseline none --harness-bin '$H' --out '$OUT/capacity64'"
step check "$G" check --backend cuda --baseline none --out "$OUT/check"
for f in plan compose capacity capacity64 check; do
  [ -f "$OUT/$f.log" ] && { echo "== $f"; tail -n 30 "$OUT/$f.log"; }
done
python3 - "$OUT" <<'PY' || true
import json, sys, os
out = sys.argv[1]
for name in ("capacity", "capacity64"):
    p = os.path.join(out, name, "report.json")
    if not os.path.exists(p):
        continue
    r = json.load(open(p))
    for c, v in r["components"].items():
        m = {k: x["value"] for k, x in v["metrics"].items()}
        print(name, c, "kv_capacity_tokens", m.get("kv_capacity_tokens"), "per_token", m.get("kv_cache_per_token"),
              "prefill", m.get("prefill_peak"), "decode", m.get("decode_peak"), "context", v.get("context_reserve_bytes"),
              "emulated", v.get("emulated_block_bytes"), "check", v.get("kv_capacity_check"))
p = os.path.join(out, "compose", "report.json")
if os.path.exists(p):
    r = json.load(open(p))
    for c, v in r["components"].items():
        print("compose", c, {k: v["metrics"][k]["value"] for k in ("training_peak", "activations", "params") if k in v["metrics"]})
PY
cat "$OUT/steps.txt"

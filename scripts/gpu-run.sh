#!/usr/bin/env bash
# The GPU checks, run on a CUDA machine with a gate built with `--features cuda`
# (see docs/gpu.md). Everything lands in $OUT/gpu.tgz plus $OUT/gpu.log.
#   GATE   the CUDA gate binary            (default .device/gate)
#   CPU    folder of CPU reports to compare (default .gpu/cpu: <name>/report.json)
#   PEER   folder with tft_ref.py and whl/  (default .gpu; skipped when absent)
set -uo pipefail
GATE=${GATE:-.device/gate}
CPU=${CPU:-.gpu/cpu}
PEER=${PEER:-.gpu}
OUT=${OUT:-target/gpu-out}
W=$(mktemp -d)
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
exec > >(tee "$OUT/gpu.log") 2>&1

step() { echo; echo "=== $*"; }
step "machine"; date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
"$GATE" --version

step "no GPU asked for: the CPU default still works here"
"$GATE" check --budgets examples/mlp.yaml --out "$W/mlp-cpu" >/dev/null; echo "exit $?"

step "mlp on cuda"
"$GATE" check --backend cuda --budgets examples/mlp.yaml --out "$W/mlp"; echo "exit $?"

step "repository budgets.yaml on cuda (all four members)"
"$GATE" check --backend cuda --out "$W/repo"; echo "exit $?"

step "examples/seed-report.yaml on cuda, emulating the 4 GiB card"
"$GATE" check --backend cuda --emulate-capacity --budgets examples/seed-report.yaml --out "$W/seed-emulated"; echo "exit $?"

step "examples/seed-report.yaml on cuda, whole H200"
"$GATE" check --backend cuda --budgets examples/seed-report.yaml --out "$W/seed"; echo "exit $?"

step "CPU vs GPU tensor bytes"
for d in mlp repo seed; do
  [ -f "$CPU/$d/report.json" ] && python3 scripts/compare-reports.py "$CPU/$d/report.json" "$W/$d/report.json"
done

if [ -f "$PEER/tft_ref.py" ]; then
  step "peer: pytorch-forecasting TFT (hidden_continuous_size 64, batch 32)"
  python3 -m pip install -q --no-index --no-deps --target "$W/site" "$PEER"/whl/*.whl && \
    PYTHONPATH="$W/site" python3 "$PEER/tft_ref.py" --hcs 64 --batches 32 --out "$W/peer"
  echo "exit $?"
fi
tar czf "$OUT/gpu.tgz" -C "$W" .

#!/usr/bin/env bash
# Evidence for issues #16 and #18 on a CUDA machine (docs/gpu.md):
#  1. `growth` of every built-in model at the repository's configs, on the
#     CUDA pool, each with `growth: < 1 B`, and their memory timelines;
#  2. the repository's gate (`budgets.yaml`) run again and again (up to 10
#     times, within BUDGET_S seconds), printing each run's step_time_ratio,
#     its 95 % interval and verdict, and how long each profile took.
# Everything lands under $OUT (reports, SVGs, evidence.log).
#   GATE      the CUDA gate binary (default .device/gate)
#   BUDGET_S  seconds to stay within (default 540)
set -uo pipefail
GATE=${GATE:-.device/gate}
OUT=${OUT:-target/gpu-out}
BUDGET_S=${BUDGET_S:-540}
RUNS=${RUNS:-10}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
exec > >(tee "$OUT/evidence.log") 2>&1
step() { echo; echo "=== $* (t=${SECONDS}s)"; }

step "machine"; date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
"$GATE" --version

# Goal 4 of #18: what the first CUDA process on a machine pays. candle's
# kernels are PTX that the driver compiles at first load and caches (in
# ~/.nv/ComputeCache), so the same small run is timed cold, then warm.
step "cold start: the same mlp run twice"
for n in cold warm; do
  t0=$(date +%s.%N)
  "$GATE" check --backend cuda --budgets examples/mlp.yaml --baseline none --out "$OUT/mlp-$n" >/dev/null 2>"$OUT/mlp-$n.stderr"
  echo "$n: exit $?, $(python3 -c "import sys; print(round($(date +%s.%N) - $t0, 2))") s"
  grep -E "profiled in" "$OUT/mlp-$n.stderr" | sed 's/^/   /'
done

# The repository's components with a growth budget each; the plain TFT as a
# component of its own so that it has one too. No ensemble: not the point.
step "growth of every built-in model on cuda"
cat > "$OUT/growth.yaml" <<'YAML'
version: 1
device: { name: RTX 3050 Ti Laptop GPU, capacity: 4 GiB }
defaults: { dtype: f32, seed: 42, timing: { warmup: 1, steps: 3 } }
components:
  mlp:
    workload: mlp
    budgets: { growth: < 1 B }
  tft:
    workload: tft
    batch_size: 32
    checkpoint: { chunk: 320 }
    config: { input_dim: 256, hidden_dim: 64, num_heads: 4, num_layers: 2, sequence_length: 60, prediction_horizon: 5, num_quantiles: 9, num_static_features: 5, num_known_features: 10, num_unknown_features: 241, dropout: 0.1 }
    budgets: { growth: < 1 B }
  tft_plain:
    workload: tft
    batch_size: 32
    config: { input_dim: 256, hidden_dim: 64, num_heads: 4, num_layers: 2, sequence_length: 60, prediction_horizon: 5, num_quantiles: 9, num_static_features: 5, num_known_features: 10, num_unknown_features: 241, dropout: 0.1 }
    budgets: { growth: < 1 B }
  dqn:
    workload: dqn
    batch_size: 64
    config: { target_sync: 100 }
    budgets: { growth: < 1 B }
  ppo:
    workload: ppo
    config: { rollout_steps: 2048, num_envs: 8, minibatch: 2048 }
    budgets: { growth: < 1 B }
  mamba2:
    workload: mamba2
    batch_size: 16
    config: { d_model: 128, n_layers: 2, d_state: 64, chunk_size: 32, seq_len: 64 }
    budgets: { growth: < 1 B }
YAML
"$GATE" check --backend cuda --budgets "$OUT/growth.yaml" --baseline none --out "$OUT/growth"
echo "exit $?"
python3 - "$OUT/growth/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for name, c in r["components"].items():
    m = c.get("metrics", {})
    g = m.get("growth", {}).get("value")
    tl = c.get("timeline") or {}
    pk = tl.get("peak") or {}
    print(f"{name}: growth {g} B; training_peak {m.get('training_peak', {}).get('value')} B; "
          f"timeline {tl.get('source')} {len(tl.get('samples', []))} samples, peak {pk.get('bytes')} B "
          f"in {pk.get('phase')} at {pk.get('blocks')}")
PY
ls -la "$OUT/growth"
tar czf "$OUT/growth.tgz" -C "$OUT" growth && rm -rf "$OUT/growth"

step "the repository's gate, run after run"
for i in $(seq "$RUNS"); do
  if [ $((SECONDS)) -gt $((BUDGET_S - 45)) ]; then echo "stopping before run $i: ${SECONDS}s used"; break; fi
  t0=$SECONDS
  "$GATE" check --backend cuda --baseline none --out "$OUT/run$i" > "$OUT/run$i.stdout" 2> "$OUT/run$i.stderr"
  rc=$?
  python3 - "$OUT/run$i/report.json" "$i" "$rc" "$((SECONDS - t0))" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); i, rc, secs = sys.argv[2:5]
for x in r["results"]:
    if x.get("metric") == "step_time_ratio":
        iv = x.get("interval") or {}
        print(f"run {i}: exit {rc}, {secs} s; step_time_ratio {x.get('measured')} "
              f"[{iv.get('low')}, {iv.get('high')}] {iv.get('confidence')} n={iv.get('samples')} -> {x.get('status')}")
for name, c in r["components"].items():
    print(f"   {name}: phase_seconds {c.get('phase_seconds')}")
PY
  grep -E "profiled in|^time:" "$OUT/run$i.stderr" | sed 's/^/   /'
  tar czf "$OUT/run$i.tgz" -C "$OUT" "run$i" "run$i.stdout" "run$i.stderr" && rm -rf "$OUT/run$i" "$OUT/run$i.stdout" "$OUT/run$i.stderr"
done
step "done"

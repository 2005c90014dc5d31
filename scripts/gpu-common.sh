#!/usr/bin/env bash
# Sourced by the scripts/gpu-*.sh run on the GPU machine (no cargo): unpacks
# the CUDA binaries carried xz'd in .devicez/ into .device/, records the
# card in $OUT/gpu.txt, sets G to the cuda gate, and defines `step NAME CMD…`
# (its log in $OUT/NAME.log, one summary line; ONLY="a b" runs only the
# steps so named, for a later call that completes an earlier one).
set -u
mkdir -p "$OUT" .device
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for f in .devicez/*.xz; do
  b=$(basename "$f" .xz)
  xz -dc "$f" > ".device/$b" 2>/dev/null || python3 -c 'import lzma,sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())' "$f" > ".device/$b"
  chmod +x ".device/$b"
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
G=$(realpath .device/gate)
step() {
  local name=$1; shift
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then return; fi
  local t0=$SECONDS; "$@" > "$OUT/$name.log" 2>&1; echo "$name: exit $? in $((SECONDS - t0)) s" | tee -a "$OUT/steps.txt"
  # What is done so far, in one archive: a call cut off at its limit still
  # brings back every finished step (the device returns few files).
  if [ -n "${PACK:-}" ]; then tar -czf "$PACK.tmp" -C "$OUT" --exclude="*.svg" . && mv "$PACK.tmp" "$PACK"; fi
}

#!/usr/bin/env bash
# Builds the `cuda` gate on a machine with no GPU and no CUDA toolkit, from
# PyPI wheels only (CUDA 13.0.x, for NVIDIA driver >= 580). Used by the
# release workflow and by the GitHub Action's build-from-source fallback.
#
# Usage, from anywhere:  scripts/build-cuda.sh [--out DIR] [cargo build args...]
#   default cargo args: --release --locked --features cuda --bin gate
#   --out DIR: where the stripped binaries go (default: <project>/.device)
# Env:
#   CUDA_WHEELS       toolkit venv (default ~/.cache/cuda-wheels)
#   CUDA_COMPUTE_CAP  kernels' compute capability (default 80: Ampere and newer,
#                     see docs/release.md)
#   CARGO_TARGET_DIR  (default <project>/target/cuda: apart from the CPU build)
# Needs: python3 with venv, gcc, cargo. A cold build takes 12-21 minutes on 2
# cores (candle-kernels' nvcc work); later builds take seconds.
set -euo pipefail
PROJ=$(cd "$(dirname "$0")/.." && pwd)
OUT="$PROJ/.device"
if [ "${1:-}" = "--out" ]; then OUT=$(mkdir -p "$2" && cd "$2" && pwd); shift 2; fi
ARGS=("$@"); [ ${#ARGS[@]} -gt 0 ] || ARGS=(--release --locked --features cuda --bin gate)
PREFIX=${CUDA_WHEELS:-$HOME/.cache/cuda-wheels}

# 1. CUDA 13.0.x build tools, pinned: a newer PTX ISA does not JIT on driver 580.
if [ ! -x "$PREFIX/bin/pip" ]; then python3 -m venv "$PREFIX"; fi
if [ ! -f "$PREFIX/.installed-13.0" ]; then
  "$PREFIX/bin/pip" install -q --no-cache-dir \
    nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88 \
    nvidia-cuda-runtime==13.0.88 nvidia-cuda-cccl==13.0.85 nvidia-cuda-nvrtc==13.0.88 \
    nvidia-cublas==13.0.2.14 nvidia-curand==10.4.0.35
  touch "$PREFIX/.installed-13.0"
fi
CU=$(ls -d "$PREFIX"/lib/python3*/site-packages/nvidia/cu13 | head -1)

# 2. A CUDA_HOME that cudarc and candle-kernels understand: unversioned .so
#    links, and a link-only libcuda stub (the driver's library is used at run
#    time). The stub's symbols are read from the cudarc crate of *this* build:
#    `cargo metadata` needs `--features cuda`, or cudarc is not in the graph.
H="$PREFIX/cuda-home"
mkdir -p "$H/lib/stubs"
for d in bin include nvvm; do ln -sfn "$CU/$d" "$H/$d"; done
for f in "$CU"/lib/*.so.* "$CU"/lib/*.a; do
  [ -e "$f" ] || continue
  b=$(basename "$f"); ln -sfn "$f" "$H/lib/$b"
  case "$b" in *.so.*) ln -sfn "$f" "$H/lib/${b%%.so*}.so";; esac
done
if [ ! -f "$H/lib/stubs/libcuda.so" ]; then
  cargo fetch --locked --manifest-path "$PROJ/Cargo.toml" >/dev/null
  CUDARC=$(cargo metadata --format-version 1 --locked --features cuda --manifest-path "$PROJ/Cargo.toml" |
    python3 -c 'import json,sys,os; m=json.load(sys.stdin); print(next(os.path.dirname(p["manifest_path"]) for p in m["packages"] if p["name"]=="cudarc"))')
  grep -o 'fn cu[A-Za-z0-9_]*(' "$CUDARC/src/driver/sys/mod.rs" | sed 's/^fn //; s/($//' | sort -u |
    awk '{print "void " $1 "(void) {}"}' > "$H/lib/stubs/libcuda_stub.c"
  gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$H/lib/stubs/libcuda.so" "$H/lib/stubs/libcuda_stub.c"
fi

# 3. Build, in a target dir apart from the CPU build's so neither invalidates
#    the other.
export CUDA_HOME="$H" PATH="$H/bin:$PATH" CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-80}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PROJ/target/cuda}
mkdir -p "$CARGO_TARGET_DIR" "$OUT"
echo "building with CUDA_COMPUTE_CAP=$CUDA_COMPUTE_CAP into $CARGO_TARGET_DIR" >&2
(cd "$PROJ" && cargo build "${ARGS[@]}" --message-format=json-render-diagnostics) |
  python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("executable"): print(m["executable"])' > "$CARGO_TARGET_DIR/built.txt"
while read -r exe; do
  cp "$exe" "$OUT/" && strip "$OUT/$(basename "$exe")"
  echo "$OUT/$(basename "$exe")"
done < "$CARGO_TARGET_DIR/built.txt"
# At run time the binary needs the driver's libcuda.so.1 and the CUDA 13
# runtime libraries (libcublas.so.13, libcurand.so.10, libcudart.so.13): from
# a CUDA 13 toolkit, or from the same wheels (docs/release.md).

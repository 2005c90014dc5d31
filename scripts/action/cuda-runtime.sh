#!/usr/bin/env bash
# Makes a cuda build of gate start: it links the driver's libcuda.so.1 and
# the CUDA 13.0 runtime (libcublas.so.13, libcurand.so.10, libcudart.so.13).
# When the runtime is missing, installs it from PyPI (the same pinned wheels
# the build used) and adds it to LD_LIBRARY_PATH (also via $GITHUB_ENV when
# set). Usage: cuda-runtime.sh PATH/TO/gate
set -euo pipefail
exe=$1
ldd "$exe" | grep -q 'not found' || exit 0
missing=$(ldd "$exe" | awk '/not found/ {print $1}' | tr '\n' ' ')
if echo "$missing" | grep -q 'libcuda\.so'; then
  echo "::error title=gate::libcuda.so.1 (the NVIDIA driver's library) is missing: no usable NVIDIA driver here"
  exit 3
fi
# A fresh venv per job under RUNNER_TEMP (emptied by the runner for every
# job), never one an earlier job left in $HOME/.cache: on a persistent
# self-hosted runner that job may have run a fork's code.
# https://docs.github.com/en/actions/security-for-github-actions/security-guides/security-hardening-for-github-actions#hardening-for-self-hosted-runners
venv="${GATE_CUDA_RUNTIME:-$(mktemp -d "${RUNNER_TEMP:-/tmp}/gate-cuda-runtime-13.0.XXXXXX")}"
echo "gate: installing the CUDA 13.0 runtime libraries from PyPI into $venv for: $missing" >&2
python3 -m venv --clear "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check \
  nvidia-cuda-runtime==13.0.88 nvidia-cublas==13.0.2.14 nvidia-curand==10.4.0.35
lib=$(ls -d "$venv"/lib/python3*/site-packages/nvidia/cu13/lib | head -1)
if [ -n "${GITHUB_ENV:-}" ]; then
  echo "LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" >> "$GITHUB_ENV"
fi
echo "$lib"

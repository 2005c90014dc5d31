#!/usr/bin/env bash
# The gate action, step 2: use the verified release binary, or the cached
# build, or build from the action's source (CPU: cargo; cuda: the wheel-based
# recipe in scripts/build-cuda.sh). Then puts gate on PATH and, for a cuda
# build, makes sure the CUDA 13 runtime libraries are found.
# Env (from action.yml): ACTION_PATH FOUND BIN_DIR TARGET_DIR FEATURES SOURCE_KEY
set -euo pipefail
out() { echo "$1=$2" >> "$GITHUB_OUTPUT"; }
note() { echo "gate action: $*" >&2; }
from=release
if [ "$FOUND" != true ]; then
  if [ -x "$BIN_DIR/gate" ] && [ "$(cat "$BIN_DIR/.source-key" 2>/dev/null)" = "$SOURCE_KEY" ]; then
    from=cache
    note "using the cached build of this source ($SOURCE_KEY)"
  else
    from=source
    command -v cargo >/dev/null || {
      echo "::error title=gate action::no prebuilt gate for this runner and no cargo to build one"
      echo "hint: install Rust (e.g. dtolnay/rust-toolchain@stable) before this action, or use a Linux X64 runner"
      exit 3
    }
    commit=$(git -C "$ACTION_PATH" rev-parse --short=12 HEAD 2>/dev/null || true)
    export GATE_BUILD_COMMIT="$commit" CARGO_TARGET_DIR="$TARGET_DIR" CARGO_TERM_COLOR=never
    mkdir -p "$BIN_DIR"
    if [ "$FEATURES" = cuda ]; then
      note "building the cuda gate from source (a cold build takes 12-21 minutes; cached afterwards)"
      bash "$ACTION_PATH/scripts/build-cuda.sh" --out "$BIN_DIR" --release --locked --features cuda --bin gate
    else
      note "building gate from source (cached afterwards)"
      cargo build --release --locked --bin gate --manifest-path "$ACTION_PATH/Cargo.toml"
      install -m 0755 "$TARGET_DIR/release/gate" "$BIN_DIR/gate"
    fi
    echo "$SOURCE_KEY" > "$BIN_DIR/.source-key"
  fi
fi
echo "$BIN_DIR" >> "$GITHUB_PATH"
# A cuda build needs the CUDA 13 runtime libraries to start.
if [ "$FEATURES" = cuda ]; then
  lib=$(bash "$ACTION_PATH/scripts/action/cuda-runtime.sh" "$BIN_DIR/gate")
  [ -z "$lib" ] || export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
version=$("$BIN_DIR/gate" --version | tr '\n' ' ')
note "$version (from $from)"
out version "$version"
out from "$from"

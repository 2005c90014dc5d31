#!/usr/bin/env bash
# The gate action, step 2: use the verified release binary, or the cached
# build, or build from the action's source (CPU: cargo; cuda: the wheel-based
# recipe in scripts/build-cuda.sh). Then puts gate on PATH and, for a cuda
# build, makes sure the CUDA 13 runtime libraries are found.
# Env (from action.yml): ACTION_PATH FOUND BIN_DIR TARGET_DIR FEATURES SOURCE_KEY,
# and for a release binary ARCHIVE (the downloaded archive), RELEASE_REPO
# (OWNER/REPO it came from) and GH_TOKEN (only for `gh attestation verify`).
set -euo pipefail
out() { echo "$1=$2" >> "$GITHUB_OUTPUT"; }
note() { echo "gate action: $*" >&2; }
# sha256sum, else shasum (as find-release.sh): the same lines either way.
sha256() { if command -v sha256sum >/dev/null 2>&1; then sha256sum "$@"; else shasum -a 256 "$@"; fi; }
# The token is for gh alone: a build from source runs crates' build scripts.
gh_token="${GH_TOKEN:-}"
unset GH_TOKEN GITHUB_TOKEN
from=release
if [ "$FOUND" = true ]; then
  # The release's build provenance (gate-release.yml attests each archive
  # with actions/attest-build-provenance): checked where the runner has gh,
  # against the release's repository and the workflow that built it. No gh
  # (or one too old for `gh attestation`, added in gh 2.49.0, by the
  # version it says): a note, and the SHA256SUMS check that find-release.sh
  # made stands alone. A check that runs and fails stops the job, and so
  # does a gh that cannot run at all (#43: it was taken for an old one):
  # the binary is removed unrun.
  server="${GITHUB_SERVER_URL:-https://github.com}"
  refuse_gh() {
    echo "::error title=gate action::$1: the release's build provenance cannot be checked, so its binary is not used"
    echo "hint: repair or remove that gh (without gh the SHA256SUMS check stands alone), or pass \`version: source\` to build gate from source"
    rm -f "$BIN_DIR/gate"; exit 1
  }
  if ! command -v gh >/dev/null 2>&1; then
    note "gh is not installed: the release's build provenance is not verified (SHA256SUMS was)"
  elif ! gh_version=$(gh --version 2>&1); then
    refuse_gh "gh is on PATH but does not run (\`gh --version\` failed)"
  elif ! gh attestation verify --help >/dev/null 2>&1; then
    if [[ $gh_version =~ gh\ version\ ([0-9]+)\.([0-9]+) ]] \
        && (( BASH_REMATCH[1] < 2 || (BASH_REMATCH[1] == 2 && BASH_REMATCH[2] < 49) )); then
      note "this gh (${BASH_REMATCH[0]}) has no \`gh attestation\` (gh 2.49.0 or newer has): the release's build provenance is not verified (SHA256SUMS was)"
    else
      refuse_gh "this gh says it is \`${gh_version%%$'\n'*}\`, and \`gh attestation verify --help\` fails"
    fi
  elif [ -z "$gh_token" ]; then
    note "no token for gh (the action's \`token\` is empty): the release's build provenance is not verified (SHA256SUMS was)"
  elif [ "$server" != https://github.com ]; then
    note "attestations are checked on github.com only (this is $server): the build provenance is not verified (SHA256SUMS was)"
  elif [ -z "${ARCHIVE:-}" ] || [ -z "${RELEASE_REPO:-}" ]; then
    echo "::error title=gate action::the release archive or its repository is unknown: cannot verify its provenance"
    rm -f "$BIN_DIR/gate"; exit 1
  elif GH_TOKEN="$gh_token" gh attestation verify "$ARCHIVE" --repo "$RELEASE_REPO" \
      --signer-workflow "$RELEASE_REPO/.github/workflows/gate-release.yml" >&2; then
    note "build provenance verified: $(basename "$ARCHIVE") was built by $RELEASE_REPO's gate-release.yml"
  else
    echo "::error title=gate action::$(basename "$ARCHIVE") has no valid build provenance from $RELEASE_REPO (gh attestation verify failed): not using it"
    echo "hint: a release made before gate attested its archives has none: pin a newer release, or \`version: source\` to build from source"
    rm -f "$BIN_DIR/gate"; exit 1
  fi
fi
if [ "$FOUND" != true ]; then
  # A cached build is run only when it is this source's and its bytes match
  # the SHA-256 recorded when it was built (stored with it in the cache
  # entry); anything else is deleted unrun and gate is built again.
  cached=false
  if [ -e "$BIN_DIR/gate" ] && [ "$(cat "$BIN_DIR/.source-key" 2>/dev/null)" = "$SOURCE_KEY" ]; then
    if [ -f "$BIN_DIR/gate.sha256" ] && (cd "$BIN_DIR" && sha256 --status -c gate.sha256); then
      cached=true
    else
      echo "::warning title=gate action::the cached gate does not match the SHA-256 recorded at its build: not running it; building gate again"
      rm -f "$BIN_DIR/gate" "$BIN_DIR/gate.sha256" "$BIN_DIR/.source-key"
    fi
  fi
  if [ "$cached" = true ]; then
    from=cache
    note "using the cached build of this source ($SOURCE_KEY), SHA-256 checked"
  else
    from=source
    command -v cargo >/dev/null || {
      echo "::error title=gate action::no prebuilt gate for this runner and no cargo to build one"
      echo "hint: install Rust (e.g. dtolnay/rust-toolchain@stable) before this action, or use a Linux X64 runner"
      exit 3
    }
    commit=$(git -C "$ACTION_PATH" rev-parse --short=12 HEAD 2>/dev/null || true)
    export GATE_BUILD_COMMIT="$commit" CARGO_TARGET_DIR="$TARGET_DIR" CARGO_TERM_COLOR=never
    # The action may be checked out inside the caller's tree, where the
    # caller's rust-toolchain.toml and .cargo/config.toml would apply (cargo
    # and rustup look for them from the working directory up). So build a
    # copy outside that tree, and drop the caller's build flags from the env.
    src=$(mktemp -d "${RUNNER_TEMP:-/tmp}/gate-src.XXXXXX")
    tar -C "$ACTION_PATH" --exclude=./target --exclude=./.git -cf - . | tar -C "$src" -xf -
    unset RUSTFLAGS CARGO_ENCODED_RUSTFLAGS CARGO_BUILD_RUSTFLAGS CARGO_BUILD_TARGET
    # A pinned toolchain, through RUSTUP_TOOLCHAIN rather than `cargo +V`: the
    # variable beats any rust-toolchain.toml and reaches every cargo and rustc
    # the build runs (build-cuda.sh calls cargo several times). The version
    # is the one gate's CI tests; GATE_RUST_TOOLCHAIN overrides it.
    toolchain="${GATE_RUST_TOOLCHAIN:-1.95.0}"
    if command -v rustup >/dev/null 2>&1; then
      (cd "$src" && { rustup which --toolchain "$toolchain" cargo >/dev/null 2>&1 ||
        rustup toolchain install "$toolchain" --profile minimal --no-self-update >&2; })
      export RUSTUP_TOOLCHAIN="$toolchain"
    else
      note "no rustup: building with $(cd "$src" && cargo --version), not the pinned $toolchain"
    fi
    mkdir -p "$BIN_DIR"
    # The CUDA build tools too: a fresh venv per job, not one an earlier job left.
    export CUDA_WHEELS="${CUDA_WHEELS:-${RUNNER_TEMP:-/tmp}/gate-cuda-wheels}"
    if [ "$FEATURES" = cuda ]; then
      note "building the cuda gate from source (a cold build takes 12-21 minutes; cached afterwards)"
      bash "$src/scripts/build-cuda.sh" --out "$BIN_DIR" --release --locked --features cuda --bin gate
    else
      note "building gate from source with $toolchain (cached afterwards)"
      (cd "$src" && cargo build --release --locked --bin gate)
      install -m 0755 "$TARGET_DIR/release/gate" "$BIN_DIR/gate"
    fi
    rm -rf "$src"
    (cd "$BIN_DIR" && sha256 gate > gate.sha256)
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

#!/usr/bin/env bash
# The gate action, step 2: use the verified release binary, or the cached
# build, or build from the action's source (CPU: cargo; cuda: the wheel-based
# recipe in scripts/build-cuda.sh). Then puts gate on PATH and, for a cuda
# build, makes sure the CUDA 13 runtime libraries are found.
# Env (from action.yml): ACTION_PATH FOUND BIN_DIR TARGET_DIR FEATURES SOURCE_KEY,
# and for a release binary ARCHIVE (the downloaded archive), RELEASE_REPO
# (OWNER/REPO it came from), BUNDLE (the release's Sigstore bundle, where
# it has one) and GH_TOKEN (only for `gh attestation verify`).
set -euo pipefail
out() { echo "$1=$2" >> "$GITHUB_OUTPUT"; }
note() { echo "gate action: $*" >&2; }
# sha256sum, else shasum (as find-release.sh): the same lines either way.
sha256() { if command -v sha256sum >/dev/null 2>&1; then sha256sum "$@"; else shasum -a 256 "$@"; fi; }
# The token is for gh alone: a build from source runs crates' build scripts.
gh_token="${GH_TOKEN:-}"
unset GH_TOKEN GITHUB_TOKEN
# Whether gh is VERSION or newer: `gh --version` says `gh version X.Y.Z (date)`.
gh_at_least() {
  local have want i
  have=$(gh --version 2>/dev/null) || return 1
  have=${have#gh version }; have=${have%% *}
  IFS=. read -r -a have <<< "$have"; IFS=. read -r -a want <<< "$1"
  for i in 0 1 2; do
    [[ "${have[$i]:-0}" =~ ^[0-9]+$ ]] || return 1
    if (( ${have[$i]:-0} > ${want[$i]} )); then return 0; fi
    if (( ${have[$i]:-0} < ${want[$i]} )); then return 1; fi
  done
  return 0
}
# Whether gh's failure was a refusal to reach GitHub or Sigstore (an
# answer from the attestations API such as 403, which it has given workflow
# tokens, a rate limit, a 5xx, no network, no TUF metadata), not a verdict
# on the archive: a warning then, the SHA256SUMS check standing alone. Any
# other failure (no attestation for these bytes, a bad signature, another
# repository or workflow) is a verdict, and fails.
gh_refused() {
  local refusal='HTTP (401|403|429|5[0-9][0-9])|Resource not accessible|rate limit|dial tcp|no such host|connection refused|i/o timeout|TLS handshake|(TUF|tuf) (client|metadata|repo)'
  [[ "$1" =~ $refusal ]]
}
# Sigstore's trusted root names a tlog key gh reads from 2.56.0 on; an older
# gh fails every verification (GitGuardian/ggshield#1325).
GH_MIN=2.56.0
from=release
if [ "$FOUND" = true ]; then
  # The release's build provenance (gate-release.yml attests the archives
  # with actions/attest-build-provenance and ships the Sigstore bundle as the
  # release asset gate-TAG.sigstore.json): verified offline with `gh
  # attestation verify --bundle` (no attestations API, no token; gh still
  # fetches Sigstore's trusted root), else, for a release without one, by
  # asking the API. No gh, or one older than $GH_MIN by the version it says:
  # a note, and the SHA256SUMS check that find-release.sh made stands alone.
  # gh that cannot reach GitHub or Sigstore: a warning, the same. gh that
  # cannot run at all, or says it is new enough and has no working `gh
  # attestation` (#43: it was taken for an old one), or says the archive's
  # provenance is not this repository's release workflow's: the job fails
  # and the binary is removed unrun.
  server="${GITHUB_SERVER_URL:-https://github.com}"
  refuse_gh() {
    echo "::error title=gate action::$1: the release's build provenance cannot be checked, so its binary is not used"
    echo "hint: repair or remove that gh (without gh the SHA256SUMS check stands alone), or pass \`version: source\` to build gate from source"
    rm -f "$BIN_DIR/gate"; exit 1
  }
  verify=(attestation verify "${ARCHIVE:-}" --repo "${RELEASE_REPO:-}"
          --signer-workflow "${RELEASE_REPO:-}/.github/workflows/gate-release.yml")
  [ -n "${BUNDLE:-}" ] && verify+=(--bundle "$BUNDLE")
  if ! command -v gh >/dev/null 2>&1; then
    note "gh is not installed: the release's build provenance is not verified (SHA256SUMS was)"
  elif ! gh_version=$(gh --version 2>&1); then
    refuse_gh "gh is on PATH but does not run (\`gh --version\` failed)"
  elif ! [[ $gh_version =~ gh\ version\ [0-9]+\.[0-9]+ ]]; then
    refuse_gh "this gh runs but its version cannot be read (\`gh --version\` says \`${gh_version%%$'\n'*}\`)"
  elif ! gh_at_least "$GH_MIN"; then
    note "this gh (${gh_version%%$'\n'*}) cannot verify Sigstore's current attestations ($GH_MIN or newer can): the release's build provenance is not verified (SHA256SUMS was)"
  elif ! gh attestation verify --help >/dev/null 2>&1; then
    refuse_gh "this gh says it is \`${gh_version%%$'\n'*}\`, and \`gh attestation verify --help\` fails"
  elif [ -z "${BUNDLE:-}" ] && [ -z "$gh_token" ]; then
    note "no token for gh (the action's \`token\` is empty) and no bundle in the release: the release's build provenance is not verified (SHA256SUMS was)"
  elif [ -z "${BUNDLE:-}" ] && [ "$server" != https://github.com ]; then
    note "attestations are checked on github.com only (this is $server): the build provenance is not verified (SHA256SUMS was)"
  elif [ -z "${ARCHIVE:-}" ] || [ -z "${RELEASE_REPO:-}" ]; then
    echo "::error title=gate action::the release archive or its repository is unknown: cannot verify its provenance"
    rm -f "$BIN_DIR/gate"; exit 1
  elif said=$(GH_TOKEN="$gh_token" gh "${verify[@]}" 2>&1); then
    printf '%s\n' "$said" >&2
    how=""; [ -n "${BUNDLE:-}" ] && how=" offline, from the release bundle"
    note "build provenance verified$how: $(basename "$ARCHIVE") was built by $RELEASE_REPO's gate-release.yml"
  elif gh_refused "$said"; then
    printf '%s\n' "$said" >&2
    echo "::warning title=gate action::gh could not reach GitHub or Sigstore to verify $(basename "$ARCHIVE")'s build provenance: using it on its SHA256SUMS match alone"
  else
    printf '%s\n' "$said" >&2
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
    # Without any build output: no folder named `target` at any depth (an
    # unanchored pattern; gate tracks no path of that name), since a
    # checkout where someone built a fixture or the fuzz targets in place
    # holds gigabytes under their own target/.
    tar -C "$ACTION_PATH" --exclude=target --exclude=./.git -cf - . | tar -C "$src" -xf -
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

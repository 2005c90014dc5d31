#!/usr/bin/env bash
# The gate action, step 1: look for a prebuilt gate that matches this runner
# and this action's source; download and verify it when there is one. Always
# writes the paths and the cache key a build from source would use.
# Env (from action.yml): ACTION_PATH BACKEND VERSION REPO COMMAND
# RUNNER_OS_NAME RUNNER_ARCH_NAME, and the runner's GITHUB_* variables.
set -euo pipefail
out() { echo "$1=$2" >> "$GITHUB_OUTPUT"; }
note() { echo "gate action: $*" >&2; }
# GNU coreutils' sha256sum, else Perl's shasum (macOS images have only that);
# both print and check the same `HASH  FILE` lines.
sha256() { if command -v sha256sum >/dev/null 2>&1; then sha256sum "$@"; else shasum -a 256 "$@"; fi; }

features=cpu
if [ "$COMMAND" = check ]; then
  case "$BACKEND" in
    cuda) features=cuda ;;
    auto) [ -e /proc/driver/nvidia/version ] && features=cuda ;;
  esac
fi
out features "$features"

# Paths and cache key of a build from this action's source (install.sh holds
# the pinned toolchain, so it keys the build too).
# Under RUNNER_TEMP, which the runner empties for every job: on a persistent
# self-hosted runner no gate binary or build tree an earlier job (maybe a
# fork's) left behind is run. The machine's own state is not emptied
# (~/.cargo, ~/.rustup, whose pinned toolchain a build from source uses,
# ~/.cache/pip): only an ephemeral runner starts clean (docs/github.md#forks). A cached build comes back only through actions/cache (GitHub's
# cache service, whose entries a pull request cannot write for the default
# branch) and is checked against its recorded hash before use (install.sh).
# https://docs.github.com/en/actions/security-for-github-actions/security-guides/security-hardening-for-github-actions#hardening-for-self-hosted-runners
root="${RUNNER_TEMP:?RUNNER_TEMP is set by the runner}/gate-action"
bin_dir="$root/bin-$features"
out bin-dir "$bin_dir"
out target-dir "$root/target-$features"
source_key=$(cd "$ACTION_PATH" && find Cargo.toml Cargo.lock crates scripts/build-cuda.sh scripts/action/install.sh -type f 2>/dev/null |
  LC_ALL=C sort | while IFS= read -r f; do sha256 "$f"; done | sha256 | cut -c1-16 || true)
out source-key "$source_key"
prefix="gate-${RUNNER_OS_NAME}-${RUNNER_ARCH_NAME}-${features}-"
out cache-key "${prefix}${source_key}"
out cache-restore-key "$prefix"
# A build cache only on GitHub-hosted runners. Its entry (the binary and the
# hash recorded beside it) is written by whichever job saved it under the
# key's prefix: on a persistent self-hosted runner a default-branch job that
# had earlier run a labelled fork's commit could save a tampered build that
# every later job restores, its recorded hash proving integrity, not origin.
# RUNNER_ENVIRONMENT is `github-hosted` or `self-hosted` (docs.github.com,
# "Variables reference"); unset (an older runner, GHES) counts as self-hosted.
if [ "${RUNNER_ENVIRONMENT:-}" = github-hosted ]; then
  out build-cache true
else
  out build-cache false
  note "not a GitHub-hosted runner (RUNNER_ENVIRONMENT=${RUNNER_ENVIRONMENT:-unset}): no build cache; the release binary or a fresh build"
fi

found=false
finish() {
  out found "$found"
  if [ "$found" != true ] && [ -n "${tmp:-}" ]; then rm -rf "$tmp"; fi
}
trap finish EXIT

if [ "$VERSION" = source ]; then note "version: source: building from the action's source"; exit 0; fi
if [ "$RUNNER_OS_NAME" != Linux ] || [ "$RUNNER_ARCH_NAME" != X64 ]; then
  note "no prebuilt gate for $RUNNER_OS_NAME/$RUNNER_ARCH_NAME (only Linux X64): building from source"; exit 0
fi
tag="$VERSION"
if [ -z "$tag" ]; then
  ver=$(sed -n 's/^version *= *"\([^"]*\)".*/\1/p' "$ACTION_PATH/Cargo.toml" | head -1)
  tag="v$ver"
fi
repo="$REPO"
if [ -z "$repo" ]; then
  # A remote action lives in .../_actions/OWNER/REPO/REF
  case "$ACTION_PATH" in
    */_actions/*/*/*) rest="${ACTION_PATH#*/_actions/}"; repo="${rest%%/*}/$(echo "$rest" | cut -d/ -f2)" ;;
  esac
fi
if [ -z "$repo" ]; then note "the gate repository is unknown (set gate-repository): building from source"; exit 0; fi

triple=x86_64-unknown-linux-gnu
suffix=""
if [ "$features" = cuda ]; then suffix=-cuda; fi
asset="gate-${tag}-${triple}${suffix}.tar.gz"
base="${GITHUB_SERVER_URL:-https://github.com}/$repo/releases/download/$tag"
# Under the job's RUNNER_TEMP too, not /tmp: a self-hosted runner's /tmp
# outlives the job, and each run would leave a release archive there. A
# release that is not used is removed at once; a used one's archive stays
# for install.sh's provenance check, and the runner empties RUNNER_TEMP
# after the job.
mkdir -p "$root"
tmp=$(mktemp -d "$root/release.XXXXXX")
# Said as such: without curl the release is not looked for at all, which
# is not the same as a release without this asset (GitHub's hosted images
# have curl; a slim self-hosted or container image may not).
if ! command -v curl >/dev/null 2>&1; then
  echo "::warning title=gate action::curl is not installed on this runner, so the release $tag was not looked for: building gate from source"
  echo "hint: install curl on the runner (apt-get install curl) to use the release binary"
  exit 0
fi
if ! curl -fsSL --retry 3 -o "$tmp/$asset" "$base/$asset" || ! curl -fsSL --retry 3 -o "$tmp/SHA256SUMS" "$base/SHA256SUMS"; then
  note "no release asset $base/$asset: building from source"; exit 0
fi
# The release's Sigstore bundle (gate-release.yml ships it from v0.1.1 on),
# for install.sh's offline provenance check; an older release has none.
bundle="gate-${tag}.sigstore.json"
curl -fsSL --retry 3 -o "$tmp/$bundle" "$base/$bundle" 2>/dev/null || rm -f "$tmp/$bundle"
if ! (cd "$tmp" && grep " ${asset}\$" SHA256SUMS | sha256 -c --status); then
  echo "::error title=gate action::$asset does not match its SHA256SUMS entry; not using it"; exit 1
fi
tar -xzf "$tmp/$asset" -C "$tmp"
exe=$(find "$tmp" -type f -name gate -perm -u+x | head -1)
[ -n "$exe" ] || { note "no gate binary in $asset: building from source"; exit 0; }
# The binary must be the action's own commit when that is known (a checkout
# of a branch may be ahead of the release with the same version number): a
# git checkout's HEAD (the reusable workflow checks the action out), else
# the ref of `uses: OWNER/gate@REF` when REF is a full commit SHA (the
# runner downloads such an action as a tarball, without .git). A pin
# between releases then builds its own source, never the last release's
# binary under newer scripts. A tag or branch ref keeps the release.
# The ref comes from ACTION_PATH first: the runner downloads a remote
# action into _actions/OWNER/REPO/REF, so the path is gate's own ref even
# when gate is called from another composite action, where
# github.action_ref is the outer action's; GitHub does not promise
# github.action_ref inside a composite action at all (github/docs#25336).
# ACTION_REF only where the path names no ref.
path_ref=""
case "$ACTION_PATH" in
  */_actions/*/*/*) rest="${ACTION_PATH#*/_actions/}"; path_ref=$(echo "$rest" | cut -d/ -f3) ;;
esac
ref="${path_ref:-${ACTION_REF:-}}"
own=""
if git -C "$ACTION_PATH" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  own=$(git -C "$ACTION_PATH" rev-parse --short=12 HEAD 2>/dev/null || true)
elif [[ "$ref" =~ ^[0-9a-f]{40}$ ]]; then
  own="${ref:0:12}"
fi
# --version of a cuda build may not start without the CUDA libraries yet: read
# the commit from the release's own note instead when it fails.
commit=$(sed -n 's/^commit: //p' "$(dirname "$exe")/VERSION" 2>/dev/null || true)
if [ -n "$own" ] && [ "${own:0:12}" != "${commit:0:12}" ]; then
  note "release $tag is commit ${commit:-unknown}, this action is $own: building from source"; exit 0
fi
mkdir -p "$bin_dir"
install -m 0755 "$exe" "$bin_dir/gate"
found=true
out from release
# For install.sh's provenance check (the archive stays in $tmp for it).
out archive "$tmp/$asset"
out release-repo "$repo"
if [ -s "$tmp/$bundle" ]; then out bundle "$tmp/$bundle"; fi
note "using the release $tag ($asset, commit ${commit:-?})"

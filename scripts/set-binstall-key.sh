#!/usr/bin/env bash
# Puts a release's minisign public key into gate-cli's manifest, as
# `[package.metadata.binstall.signing]`, so the version published to
# crates.io tells `cargo binstall` which key its archives' `.sig` files
# must verify with (scripts/sign-release.sh made both). Run from the
# workspace root, before `cargo package` / scripts/publish.sh, which then
# need `--allow-dirty`: the key exists only once the release is signed.
#
# Usage: scripts/set-binstall-key.sh PUBKEY [MANIFEST]
#   MANIFEST  default crates/gate-cli/Cargo.toml
set -euo pipefail

die() {
  printf 'error: %s\n' "$1" >&2
  [ -z "${2:-}" ] || printf 'hint: %s\n' "$2" >&2
  exit 1
}

[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: scripts/set-binstall-key.sh PUBKEY [MANIFEST]"
pubkey=$1
manifest=${2:-crates/gate-cli/Cargo.toml}
# A minisign public key: base64 of 42 bytes (`Ed`, an 8-byte key id, 32 bytes).
[[ $pubkey =~ ^RW[A-Za-z0-9+/]{54}$ ]] ||
  die "\`$pubkey\` is not a minisign public key" "pass the pubkey= line scripts/sign-release.sh printed"
[ -f "$manifest" ] || die "$manifest does not exist"
grep -q '^\[package\.metadata\.binstall\]' "$manifest" ||
  die "$manifest has no [package.metadata.binstall] table" "this is gate-cli's manifest?"
! grep -q '^\[package\.metadata\.binstall\.signing\]' "$manifest" ||
  die "$manifest already names a signing key" "use a fresh checkout of the tag"
printf '\n# Written by scripts/set-binstall-key.sh for this release: the key its\n# archives'"'"' .sig files verify with (cargo binstall checks them).\n[package.metadata.binstall.signing]\nalgorithm = "minisign"\npubkey = "%s"\n' "$pubkey" >>"$manifest"
echo "$manifest: binstall verifies this release's archives with $pubkey" >&2

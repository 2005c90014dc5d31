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
# The manifest without its comments, for the checks below.
body=$(sed -E 's/^[[:space:]]*#.*$//' "$manifest")
# The table written below is appended as `[package.metadata.binstall.signing]`:
# valid TOML only when `binstall` is a `[...]` table of its own and nothing
# defines `signing` (or a key) yet, in whatever form TOML allows (a header
# with spaces or quotes, a dotted key, an inline table). Anything else is
# refused: appending would write a second table or invalid TOML.
ws='[[:space:]]*'
key() { printf '%s"?%s"?%s' "$ws" "$1" "$ws"; }
header="^$ws\[$(key package)\.$(key metadata)\.$(key binstall)\]$ws(#.*)?\$"
grep -Eq "$header" <<<"$body" ||
  die "$manifest has no [package.metadata.binstall] table (as a table header of its own)" \
    "this is gate-cli's manifest? Its binstall settings must be a \`[package.metadata.binstall]\` table, not an inline table or dotted keys"
[ "$(grep -Ec "$header" <<<"$body")" = 1 ] ||
  die "$manifest has [package.metadata.binstall] more than once" "that is not valid TOML: fix the manifest"
! grep -Eq "(^|[^A-Za-z0-9_-])\"?(signing|pubkey)\"?$ws(=|\.|\])" <<<"$body" ||
  die "$manifest already names a signing key (a \`signing\` table or a \`pubkey\`, in some TOML form)" \
    "use a fresh checkout of the tag"
printf '\n# Written by scripts/set-binstall-key.sh for this release: the key its\n# archives'"'"' .sig files verify with (cargo binstall checks them).\n[package.metadata.binstall.signing]\nalgorithm = "minisign"\npubkey = "%s"\n' "$pubkey" >>"$manifest"
echo "$manifest: binstall verifies this release's archives with $pubkey" >&2

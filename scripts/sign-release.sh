#!/usr/bin/env bash
# Signs each archive SHA256SUMS lists for `cargo binstall`, with a key made
# for this release alone, and prints the public key as `pubkey=...` (for
# $GITHUB_OUTPUT). binstall verifies a download only by a minisign
# signature, `<archive>.sig` beside it, against the `pubkey` in the
# published crate's `[package.metadata.binstall.signing]`
# (cargo-bins/cargo-binstall, SIGNING.md); it reads no SHA256SUMS. The
# secret key lives in a private temporary folder and is removed before
# this script ends, whatever happens: nothing can sign for this release
# afterwards, and no long-lived key is kept anywhere (binstall's own
# releases sign the same way). scripts/set-binstall-key.sh puts the public
# key in gate-cli's manifest before it is published.
#
# Usage: scripts/sign-release.sh DIST TAG
#   DIST  the folder with SHA256SUMS and the archives it lists
#   TAG   the release's tag, in each signature's trusted comment
# Needs: minisign (apt's `minisign` on GitHub's ubuntu images).
set -euo pipefail

die() {
  printf 'error: %s\n' "$1" >&2
  [ -z "${2:-}" ] || printf 'hint: %s\n' "$2" >&2
  exit 1
}

[ $# -eq 2 ] || die "usage: scripts/sign-release.sh DIST TAG"
dist=$1
tag=$2
[ -f "$dist/SHA256SUMS" ] || die "$dist/SHA256SUMS does not exist" "run scripts/package-release.sh first"
command -v minisign >/dev/null || die "minisign is not installed" "sudo apt-get install -y minisign"

keys=$(mktemp -d)
trap 'rm -rf "$keys"' EXIT
# -W: no password (nothing could type one); the key dies with the folder.
minisign -G -W -p "$keys/gate.pub" -s "$keys/gate.key" >/dev/null

signed=0
while read -r _ name; do
  name=${name#\*}
  [ -n "$name" ] || continue
  case $name in
    */* | .*) die "SHA256SUMS names \`$name\`, not a file of $dist" ;;
  esac
  [ -f "$dist/$name" ] || die "SHA256SUMS lists $name, which is not in $dist"
  # -H: prehashed (BLAKE2b-512 of the file, signed), what cargo-binstall
  # takes; minisign before 0.10 signed small files the legacy way without
  # it. On -V, -H refuses a legacy signature (minisign 0.10's release
  # notes), so the check below is the one binstall makes.
  minisign -S -H -W -s "$keys/gate.key" -m "$dist/$name" -x "$dist/$name.sig" \
    -t "gate $tag: $name" >/dev/null
  minisign -V -H -p "$keys/gate.pub" -m "$dist/$name" -x "$dist/$name.sig" -q >/dev/null ||
    die "the signature of $name does not verify as a prehashed one"
  signed=$((signed + 1))
done <"$dist/SHA256SUMS"
[ $signed -gt 0 ] || die "SHA256SUMS lists no archive"

# The public key file's second line is the key itself (its first, a comment).
pubkey=$(sed -n 2p "$keys/gate.pub")
[ -n "$pubkey" ] || die "minisign wrote no public key"
printf 'pubkey=%s\n' "$pubkey"
echo "signed $signed archives of $tag for cargo binstall (public key $pubkey)" >&2

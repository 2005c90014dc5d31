#!/usr/bin/env bash
# Packs the release assets: one tar.gz per build (CPU, cuda), each with the
# binary, its VERSION, shell completions, the man page, the README and the
# licence files, plus SHA256SUMS over the archives.
# Usage: scripts/package-release.sh TAG CPU_BINARY CUDA_BINARY OUT_DIR
# The completions and the man page come from the CPU binary (one clap
# definition for both builds; the cuda binary needs a driver to start).
set -euo pipefail
TAG=$1 CPU=$2 CUDA=$3 OUT=$4
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TRIPLE=x86_64-unknown-linux-gnu
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
chmod +x "$CPU" "$CUDA"
commit=$("$CPU" --version | sed -n 's/^commit: //p')
# Each archive's folder is staged here, removed at exit (it was left in
# /tmp, two folders a run).
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
for variant in cpu cuda; do
  suffix=""
  if [ "$variant" = cuda ]; then suffix=-cuda; fi
  name="gate-${TAG}-${TRIPLE}${suffix}"
  dir=$stage/$name
  mkdir -p "$dir/completions" "$dir/man"
  if [ "$variant" = cpu ]; then
    install -m 0755 "$CPU" "$dir/gate"
    "$CPU" --version > "$dir/VERSION"
  else
    install -m 0755 "$CUDA" "$dir/gate"
    printf 'gate %s\ncommit: %s\ncuda: yes (compute capability %s)\ntarget: %s\n' \
      "${TAG#v}" "$commit" "${CUDA_COMPUTE_CAP:-80}" "$TRIPLE" > "$dir/VERSION"
  fi
  "$CPU" completions bash > "$dir/completions/gate.bash"
  "$CPU" completions zsh > "$dir/completions/_gate"
  "$CPU" completions fish > "$dir/completions/gate.fish"
  "$CPU" man > "$dir/man/gate.1"
  cp "$ROOT/README.md" "$dir/"
  for f in "$ROOT"/LICENSE*; do [ -e "$f" ] && cp "$f" "$dir/"; done
  tar -C "$(dirname "$dir")" -czf "$OUT/$name.tar.gz" "$name"
  echo "$OUT/$name.tar.gz"
done
(cd "$OUT" && sha256sum -- *.tar.gz > SHA256SUMS && cat SHA256SUMS)

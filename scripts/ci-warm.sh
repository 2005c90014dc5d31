#!/usr/bin/env bash
# A warm `.ci/run` as a pull request's job gets it, measured here: the
# target/ a cold `.ci/run` left in CLONE, cleaned as rust-cache cleans it
# before saving (scripts/rust-cache-save.py, a model of the pinned action),
# restored into a fresh clone of the same commit at the same path (cargo's
# paths stay as in CI, where the checkout's path never changes), then
# `.ci/run` with CARGO_INCREMENTAL=0, as rust-cache exports it.
#
#   scripts/ci-warm.sh CLONE [--as-before]
#
# By default it models .github/workflows/ci.yml as it is:
# `cache-workspace-crates: true`, .ci-state saved beside target/ and
# GATE_CI_SOURCE_MTIMES=1. `--as-before` models the workflow before them
# (rust-cache's defaults: gate's crates are not kept, every source is new).
# CLONE's target/ is consumed; the run's log is CLONE.warm.log.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
clone=$(realpath "$1")
mode=${2:-}
origin=$(git -C "$clone" remote get-url origin)
# COMMIT: another commit to run warm on (one that changes no Rust source
# since CLONE's, say a change to .ci/run itself); CLONE's by default.
commit=${COMMIT:-$(git -C "$clone" rev-parse HEAD)}
stash="$clone.target"
rm -rf "$stash" "$clone.ci-state"
mv "$clone/target" "$stash"
# The sources' record of the cold run's build: the run's own where it made
# one (GATE_CI_SOURCE_MTIMES=1), else taken now from its untouched files.
if [ "$mode" != --as-before ]; then
  if [ -f "$clone/.ci-state/sources.tsv" ]; then
    mv "$clone/.ci-state" "$clone.ci-state"
  else
    (cd "$clone" && python3 "$here/.ci/source-mtimes" "$clone.ci-state/sources.tsv")
  fi
fi
rm -rf "$clone"
git clone -q "$origin" "$clone"
git -C "$clone" checkout -q "$commit"
mv "$stash" "$clone/target"
cd "$clone"
if [ "$mode" = --as-before ]; then
  python3 scripts/rust-cache-save.py target
  unset GATE_CI_SOURCE_MTIMES
else
  python3 scripts/rust-cache-save.py target --workspace-crates
  mv "$clone.ci-state" .ci-state
  export GATE_CI_SOURCE_MTIMES=1
fi
du -sh target >&2
# As rust-cache exports it, for both the run that filled the cache and this
# one. A cold run made without it (CARGO_INCREMENTAL unset: the dev profile
# incremental) built gate's crates in another profile, and every one of them
# rebuilds: INCREMENTAL=default then leaves it unset here too.
if [ "${INCREMENTAL:-}" = default ]; then unset CARGO_INCREMENTAL; else export CARGO_INCREMENTAL=0; fi
/usr/bin/time -v .ci/run >"$clone.warm.log" 2>&1

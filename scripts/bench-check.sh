#!/usr/bin/env bash
# The repository's main job (`gate check --baseline none`) timed with two
# gate binaries in turn — one warm-up pair, then NEW OLD NEW OLD … — and
# each one's wall seconds printed as min, median and max (#42's figures in
# docs/performance.md were taken this way). Turns keep both under the same
# host: a drift in the machine's speed reaches both alike.
#
#   scripts/bench-check.sh NEW_GATE OLD_GATE [RUNS]      (RUNS: default 3)
#   NEW_SPEC / OLD_SPEC: each binary's budgets file (default budgets.yaml;
#   an older binary may need its own commit's: `git show REV:budgets.yaml`).
#
# Load is what the machine has: for "under load 4" start two busy loops
# beside it first (`sh -c 'while :; do :; done' &`, twice).
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,13p' "$0" >&2; exit 2; }
new=$1 old=$2 runs=${3:-3}
new_spec=${NEW_SPEC:-budgets.yaml} old_spec=${OLD_SPEC:-budgets.yaml}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# one LABEL BINARY SPEC: one run, its wall seconds appended to LABEL's list.
one() {
  local start end code=0
  start=$(date +%s.%N)
  "$2" check --budgets "$3" --baseline none --out "$tmp/out-$1" >"$tmp/$1.log" 2>&1 || code=$?
  end=$(date +%s.%N)
  # 0 and 1 are verdicts; anything else means the run did not measure.
  if [ "$code" -gt 1 ]; then
    echo "$1: exit $code (see below)" >&2
    tail -n 5 "$tmp/$1.log" >&2
    exit 1
  fi
  awk -v s="$start" -v e="$end" 'BEGIN { printf "%.3f\n", e - s }' >>"$tmp/$1.times"
}

one new "$new" "$new_spec"
one old "$old" "$old_spec"
rm -f "$tmp/new.times" "$tmp/old.times"
for _ in $(seq "$runs"); do
  one new "$new" "$new_spec"
  one old "$old" "$old_spec"
done
for label in new old; do
  sort -n "$tmp/$label.times" | awk -v l="$label" '
    { t[NR] = $1 }
    END { printf "%s: wall %.1f s median (min %.1f, max %.1f; %d runs)\n", l, t[int((NR + 1) / 2)], t[1], t[NR], NR }'
done
echo "load average now: $(cut -d' ' -f1-3 /proc/loadavg)"

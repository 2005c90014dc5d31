#!/usr/bin/env bash
# The gate action, `command: comment` (in a workflow_run workflow): one
# comment per downloaded artifact `gate-<id>`. The artifact is data from a
# possibly untrusted run: gate re-renders the comment from report.json and
# checks pr.json against the measured commit; comment-mode is only read as
# one of three words.
# Env: ARTIFACTS (folder of gate-* artifacts), EVENT, GITHUB_TOKEN
set -euo pipefail
if [ "$EVENT" != pull_request ]; then
  echo "gate action: the measured run was a '$EVENT' event, not a pull request: no comment"; exit 0
fi
shopt -s nullglob
status=0
n=0
for dir in "$ARTIFACTS"/gate-*/; do
  id=$(basename "$dir")
  mode=$(head -c 16 "$dir/comment-mode" 2>/dev/null | tr -d '[:space:]' || true)
  case "$mode" in
    never) echo "gate action: $id: comment: never"; continue ;;
    on-change) flags=(--quiet) ;;
    *) flags=() ;;
  esac
  n=$((n + 1))
  gate comment --from "$dir" --id "$id" "${flags[@]}" || status=$?
done
[ "$n" -gt 0 ] || echo "gate action: no gate-* artifact to comment on"
exit "$status"

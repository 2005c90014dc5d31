#!/usr/bin/env bash
# The gate action, `command: comment` (in a workflow_run workflow): one
# comment per downloaded gate artifact. The artifact is data from a
# possibly untrusted run: gate re-renders the comment from report.json and
# checks pr.json against the measured commit; comment-mode is only read as
# one of three words, and artifact-name only as a gate id.
#
# Where the artifacts are: actions/download-artifact (v7 in action.yml; so
# since v5.0.0) extracts a LONE matching artifact straight into `path`, and
# each of several into `path/NAME` (its src/download-artifact.ts at v7.0.0,
# 37930b1: the destination is `resolvedPath` when
# `isSingleArtifactDownload || inputs.mergeMultiple || artifacts.length === 1`,
# else `path.join(resolvedPath, artifact.name)`). So a folder's name is not
# the id: each artifact names itself in the file `artifact-name`, which the
# action's `gate check` step writes, and both layouts give the same id.
# Env: ARTIFACTS (download-artifact's `path`), EVENT, GITHUB_TOKEN;
# CHECK_RUN=true also posts a check run per id, named `gate report: <id>` (needs
# `checks: write`; a refusal is a warning); GATE_COMMENT_AUTHOR is read by
# gate itself (README, "Commenting as a GitHub App").
set -euo pipefail
if [ "$EVENT" != pull_request ]; then
  echo "gate action: the measured run was a '$EVENT' event, not a pull request: no comment"; exit 0
fi
shopt -s nullglob
root="${ARTIFACTS%/}"
# Several artifacts leave only NAME folders in $ARTIFACTS; a lone one leaves
# its own files there (at least comment-mode and artifact-name).
single=false
for f in "$root"/*; do
  if [ -f "$f" ]; then single=true; break; fi
done
if [ "$single" = true ]; then
  dirs=("$root")
else
  dirs=("$root"/*/)
fi
status=0
n=0
seen=" "
# At most this many gate ids commented per run. The artifacts come from the
# measured run, whose workflow a fork's pull request can edit: without a
# cap it could upload thousands of gate-* artifacts and have this job, with
# the repository's token, post a comment for each and spend the
# repository's API allowance (GitHub's REST rate limits are per token's
# owner; content-creating requests have a secondary limit besides). A
# matrix or shards of your own stay well under it.
max=${GATE_MAX_COMMENTS:-20}
[[ "$max" =~ ^[0-9]+$ ]] && [ "$max" -gt 0 ] || max=20
for dir in "${dirs[@]}"; do
  dir="${dir%/}"
  if [ "$n" -ge "$max" ]; then
    echo "::error title=gate action::the measured run uploaded more than $max gate artifacts: only the first $max are commented (GATE_MAX_COMMENTS)"
    status=2; break
  fi
  # One short line, the action's id alphabet: the id goes into the comment's marker.
  id=$(head -c 128 "$dir/artifact-name" 2>/dev/null | head -n 1 | tr -d '[:space:]' || true)
  if ! [[ "$id" =~ ^gate-[A-Za-z0-9_.-]{1,100}$ ]]; then
    echo "::error title=gate action::$dir holds no valid artifact-name (gate-<id>): it was uploaded by an older gate action, or not by one; use one gate version in both workflows"
    status=2; continue
  fi
  if [ "$dir" != "$root" ] && [ "$(basename "$dir")" != "$id" ]; then
    echo "::warning title=gate action::the artifact $(basename "$dir") says it is $id; the comment follows the name inside"
  fi
  case "$seen" in
    *" $id "*) echo "::error title=gate action::two artifacts say they are $id: only the first is commented"; status=2; continue ;;
  esac
  seen="$seen$id "
  n=$((n + 1))
  mode=$(head -c 16 "$dir/comment-mode" 2>/dev/null | tr -d '[:space:]' || true)
  case "$mode" in
    never) echo "gate action: $id: comment: never"; continue ;;
    on-change) flags=(--quiet) ;;
    *) flags=() ;;
  esac
  # Named as what it is, a report, never like a job: GitHub attaches a
  # check run made with GITHUB_TOKEN to a check suite of its own choosing
  # for the commit, often another workflow's (community discussion 24616;
  # NasAmin/trx-parser#86), so a bare id could pass for a job's check.
  if [ "${CHECK_RUN:-false}" = true ]; then flags+=(--check-run "gate report: $id"); fi
  gate comment --from "$dir" --id "$id" "${flags[@]}" || status=$?
done
[ "$n" -gt 0 ] || [ "$status" -ne 0 ] || echo "gate action: no gate artifact in $root to comment on"
exit "$status"

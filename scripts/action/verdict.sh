#!/usr/bin/env bash
# The one check to require of a pull-request gate with a job that some
# events skip (a GPU job that a fork's PR reaches only by a maintainer's
# label). GitHub counts a skipped required job as passed ("Handling skipped
# but required checks", docs.github.com: troubleshooting required status
# checks), and every label change starts a new run on the same head commit
# whose check runs replace the earlier ones of the same name. So this job
# never skips (`if: always()`), and where the measuring job did not run in
# this run it reports the conclusion of the latest run of this workflow, for
# this head commit, in which that job did run: never `skipped`, never a pass
# it did not see.
#
# Env: RESULTS ("name=result ..." of the jobs it needs, from needs.*.result),
# LOOKUP (the one job of RESULTS a skip of which is looked up, e.g. gpu),
# EVENT (github.event_name), HEAD_SHA, FORK (true for a fork's PR),
# WORKFLOW (this workflow's file name), GITHUB_REPOSITORY, GITHUB_RUN_ID, and
# GH_TOKEN (needs `actions: read`) for `gh api`, whose `--jq` is built into
# gh (no jq on the runner needed). The REST routes ("List workflow runs for
# a workflow" with head_sha and event; "List jobs for a workflow run" with
# filter=latest) are GitHub's, as its OpenAPI description has them.
set -euo pipefail
fail() { echo "::error title=gate::$1"; [ -z "${2:-}" ] || echo "hint: $2"; exit 1; }
status=0
# A re-run of an older run's verdict (GitHub lets any job be re-run alone)
# would replace the check of the same name with that run's results, though
# a newer run for this head commit (a label added or removed since) judged
# otherwise. `run_number` orders a workflow's runs: it "increments with
# each new run" and "does not change if you re-run the workflow run"
# (GitHub's contexts reference, github.run_number; the runs list gives it
# per run). So a verdict whose run is not the newest for this head commit
# refuses to decide.
if [ "$EVENT" = pull_request ] && [ -n "${GITHUB_RUN_NUMBER:-}" ] && [[ "$HEAD_SHA" =~ ^[0-9a-f]{40}$ ]]; then
  [[ "$GITHUB_RUN_NUMBER" =~ ^[0-9]+$ ]] || fail "GITHUB_RUN_NUMBER is not a number ($GITHUB_RUN_NUMBER)"
  newer=$(gh api "repos/$GITHUB_REPOSITORY/actions/workflows/$WORKFLOW/runs?head_sha=$HEAD_SHA&event=pull_request&per_page=100" \
    --jq "[.workflow_runs[] | select((.run_number // 0) > $GITHUB_RUN_NUMBER) | .run_number] | max // empty") ||
    fail "cannot list this workflow's runs for $HEAD_SHA, so whether a newer run judged it is unknown" "the job needs \`permissions: { actions: read }\`"
  if [ -n "$newer" ]; then
    fail "run #$newer of this workflow is newer for $HEAD_SHA: this re-run of run #$GITHUB_RUN_NUMBER's verdict would replace its check with older results" \
      "re-run the newest run (#$newer), or push a new commit"
  fi
fi
for pair in $RESULTS; do
  job="${pair%%=*}"
  result="${pair#*=}"
  case "$result" in
    success) echo "gate: $job passed in this run"; continue ;;
    skipped) ;;
    *) echo "::error title=gate::$job: $result in this run (see that job)"; status=1; continue ;;
  esac
  if [ "$job" != "${LOOKUP:-}" ]; then
    echo "::error title=gate::$job was skipped on a $EVENT event: it must measure every one"; status=1; continue
  fi
  if [ "$EVENT" = merge_group ]; then
    # The queued commit may hold a fork's code: the GPU gate decides on the PR.
    echo "gate: $job is not run in a merge queue; it decided on the pull request"; continue
  fi
  [[ "$HEAD_SHA" =~ ^[0-9a-f]{40}$ ]] || fail "no head commit to look up ($HEAD_SHA)"
  # Newest first (the API's order); the current run is skipped over.
  runs=$(gh api "repos/$GITHUB_REPOSITORY/actions/workflows/$WORKFLOW/runs?head_sha=$HEAD_SHA&event=pull_request&per_page=100" \
    --jq ".workflow_runs[] | select(.id != ${GITHUB_RUN_ID:-0}) | .id") ||
    fail "cannot list this workflow's runs for $HEAD_SHA, so $job's last result is unknown" "the job needs \`permissions: { actions: read }\`"
  found=""
  for id in $runs; do
    [[ "$id" =~ ^[0-9]+$ ]] || continue
    line=$(gh api "repos/$GITHUB_REPOSITORY/actions/runs/$id/jobs?filter=latest&per_page=100" \
      --jq ".jobs[] | select(.name == \"$job\") | \"\(.status) \(.conclusion)\"" | head -n 1) ||
      fail "cannot read the jobs of run $id" "the job needs \`permissions: { actions: read }\`"
    st="${line%% *}"
    concl="${line#* }"
    case "$st" in
      "") continue ;;
      completed) ;;
      *) fail "$job of run $id is still $st on $HEAD_SHA: that run's own verdict follows" ;;
    esac
    case "$concl" in
      skipped | "" | null) continue ;;
    esac
    found="$id $concl"
    break
  done
  if [ -z "$found" ]; then
    if [ "$FORK" = true ]; then
      echo "::error title=gate::$job has not run on this fork's commit $HEAD_SHA"
      echo "hint: a maintainer reviews that commit, then adds the label gate-gpu@$HEAD_SHA"
    else
      echo "::error title=gate::$job has not run on $HEAD_SHA"
      echo "hint: re-run the workflow; $job's if: decides when it runs"
    fi
    status=1; continue
  fi
  concl="${found#* }"
  if [ "$concl" = success ]; then
    echo "gate: $job passed on $HEAD_SHA in run ${found%% *} (this run did not measure it)"
  else
    echo "::error title=gate::$job: $concl on $HEAD_SHA in run ${found%% *}, the latest that measured it"; status=1
  fi
done
exit "$status"

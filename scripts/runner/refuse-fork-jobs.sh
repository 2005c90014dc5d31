#!/usr/bin/env bash
# A job-started hook for a persistent self-hosted (GPU) runner: the runner
# runs it before every job and, when it exits non-zero, fails the job
# without running it. Unlike a workflow's `if:`, which a pull request can
# edit (on `pull_request` GitHub runs the workflow file as the PR has it),
# this lives on the machine. Install it on the runner host:
#
#   echo "ACTIONS_RUNNER_HOOK_JOB_STARTED=/opt/gate/refuse-fork-jobs.sh" >> RUNNER_DIR/.env
#
# (https://docs.github.com/en/actions/hosting-your-own-runners/managing-self-hosted-runners/running-scripts-before-or-after-a-job:
# the script sees the job's default variables, the event payload at
# GITHUB_EVENT_PATH.) Needs jq; without it every job is refused.
#
# Runs: a push of a tag or of the default branch; workflow_dispatch,
# schedule, release; a pull request (or its
# review) whose head is a branch of this repository and whose author is
# not Dependabot; a fork's or Dependabot's pull request
# only on the event of a maintainer adding the label `gate-gpu@<head SHA>`
# for the exact commit reviewed (a push after it changes the head, and the
# label no longer matches). Everything else is refused: a fork's code,
# merge_group and the merge queue's own push to its `gh-readonly-queue/...`
# branches (a queued merge may hold a fork's code), a push to any other
# branch (anyone who can push a branch, or a bot's branch, is not a
# review), pull_request_target
# and workflow_run (jobs that carry a token that may write), any other event.
set -u
refuse() {
  echo "::error title=runner hook::this self-hosted runner refuses the job: $1"
  echo "hint: $2"
  exit 1
}
event="${GITHUB_EVENT_NAME:-}"
payload="${GITHUB_EVENT_PATH:-}"
repo="${GITHUB_REPOSITORY:-}"
case "$event" in
  workflow_dispatch | schedule | release) exit 0 ;;
  push | pull_request | pull_request_review | pull_request_review_comment) ;;
  *) refuse "event '${event:-none}' may carry code or a token this runner must not hold" \
    "run that job on a GitHub-hosted runner, or give the GPU job an if: that skips '${event:-it}'" ;;
esac
command -v jq >/dev/null 2>&1 || refuse "jq is missing, so the event cannot be read" "install jq on the runner host"
[ -n "$payload" ] && [ -r "$payload" ] || refuse "no readable event payload (GITHUB_EVENT_PATH)" \
  "the runner sets GITHUB_EVENT_PATH for every job; run this as ACTIONS_RUNNER_HOOK_JOB_STARTED"
if [ "$event" = push ]; then
  # The push payload's `ref` and `repository.default_branch` (GitHub's
  # webhook events reference, "push"). A merge queue pushes every queued
  # merge to `gh-readonly-queue/<base>/pr-<N>-<sha>` (docs: "Managing a
  # merge queue"), which may hold a fork's code: only tags and the default
  # branch, which only a merge or a maintainer reaches, are admitted.
  ref=$(jq -r '.ref // empty' "$payload" 2>/dev/null)
  default=$(jq -r '.repository.default_branch // empty' "$payload" 2>/dev/null)
  case "$ref" in
    refs/tags/*) exit 0 ;;
  esac
  [ -n "$default" ] && [ "$ref" = "refs/heads/$default" ] && exit 0
  refuse "a push to '${ref:-an unnamed ref}', neither a tag nor the default branch (${default:-unknown})" \
    "run jobs for other branches on a GitHub-hosted runner, or give the GPU job an if: that admits only the default branch"
fi
head_repo=$(jq -r '.pull_request.head.repo.full_name // empty' "$payload" 2>/dev/null)
head_sha=$(jq -r '.pull_request.head.sha // empty' "$payload" 2>/dev/null)
[ -n "$head_repo" ] && [ -n "$repo" ] || refuse "the payload names no pull request head" "check the event"
# Dependabot's pull requests are branches of this repository that nobody
# reviewed (an action bump runs the new action): they take a fork's route.
author=$(jq -r '.pull_request.user.login // empty' "$payload" 2>/dev/null)
[ "$head_repo" = "$repo" ] && [ "$author" != "dependabot[bot]" ] && exit 0
action=$(jq -r '.action // empty' "$payload" 2>/dev/null)
label=$(jq -r '.label.name // empty' "$payload" 2>/dev/null)
if [ "$event" = pull_request ] && [ "$action" = labeled ] && [ -n "$head_sha" ] && [ "$label" = "gate-gpu@$head_sha" ]; then
  exit 0
fi
who="the fork $head_repo"
[ "$author" = "dependabot[bot]" ] && who="Dependabot's branch in $head_repo"
refuse "pull request code from $who (head ${head_sha:-?})" \
  "review that commit, then add the label gate-gpu@${head_sha:-HEAD_SHA} (the full SHA) to run it once"

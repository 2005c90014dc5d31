#!/usr/bin/env bash
# Publishes the workspace's crates to crates.io, one `cargo publish -p` each,
# in dependency order, and skips a version the registry's index already has:
# a re-run after a partial failure publishes what is left (docs/release.md,
# "crates.io"). Run from the workspace root.
#
# Usage: scripts/publish.sh [--registry NAME] [--no-verify] [--allow-dirty] [PACKAGE...]
#   --registry NAME  publish to registry NAME instead of crates.io; its index
#                    URL comes from CARGO_REGISTRIES_<NAME>_INDEX (sparse only),
#                    its token from CARGO_REGISTRIES_<NAME>_TOKEN, as cargo reads them
#   --no-verify, --allow-dirty  handed to each `cargo publish`
#   PACKAGE...       only these (still in dependency order); default: every
#                    publishable member of the workspace
# The token for crates.io is cargo's: CARGO_REGISTRY_TOKEN (the release
# workflow's, from rust-lang/crates-io-auth-action) or `cargo login`'s.
# Needs: cargo, curl, jq (all three on GitHub's ubuntu images).
#
# Why a loop and not `cargo publish --workspace`: that command stops before
# uploading anything when one member's version is already on the index
# ("crate gate-spec@0.1.0 already exists on ... index", seen with cargo 1.95
# against tests/it/publish.rs's registry), so it cannot finish a release
# that stopped half-way. Each crate here is its own `cargo publish -p`, which
# waits until the crate is on the index before the next one resolves
# against it.
set -euo pipefail

die() {
  printf 'error: %s\n' "$1" >&2
  [ -z "${2:-}" ] || printf 'hint: %s\n' "$2" >&2
  exit 1
}

cargo=${CARGO:-cargo}
registry=""
cargo_flags=()
selected=()
while [ $# -gt 0 ]; do
  case $1 in
    --registry)
      [ $# -ge 2 ] && [ -n "$2" ] || die "--registry needs a registry name"
      registry=$2
      shift 2
      ;;
    --no-verify | --allow-dirty)
      cargo_flags+=("$1")
      shift
      ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    -*) die "unknown option $1" "scripts/publish.sh --help" ;;
    *)
      selected+=("$1")
      shift
      ;;
  esac
done
for tool in curl jq; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool is not installed; this script reads the registry's index with it"
done

# A URL as it may be printed: a user and password in it (a private
# registry's index may carry them) shown as `***`, and its query dropped.
shown() {
  printf '%s' "$1" | sed -E 's#^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@#\1***@#; s#\?.*$#?***#'
}

# Where the index is, and how cargo names the registry in its messages.
if [ -z "$registry" ]; then
  where="crates.io"
  index="https://index.crates.io/"
  publish_to=()
else
  where="registry \`$registry\`"
  var="CARGO_REGISTRIES_$(printf '%s' "$registry" | tr 'a-z-' 'A-Z_')_INDEX"
  index=${!var:-}
  [ -n "$index" ] || die "$var is not set" "set it to the registry's index URL (sparse+http(s)://...): this script reads the index to skip what is already there"
  case $index in
    sparse+*) index=${index#sparse+} ;;
    *) die "$var is $(shown "$index"), not a sparse index (sparse+http(s)://...)" "only the sparse protocol is read here, as crates.io serves it" ;;
  esac
  publish_to=(--registry "$registry")
fi
index=${index%/}/
index_shown=$(shown "$index")

# The workspace: each publishable member, its version and the workspace
# crates it needs on the registry first (normal and build dependencies, and
# dev-dependencies that carry a version: cargo drops path-only ones from the
# package). `publish = false` (an empty list) keeps a member out; a list keeps
# it to the registries it names.
meta=$("$cargo" metadata --no-deps --format-version 1) || die "cargo metadata failed (above)" "run from the workspace root"
target=${registry:-crates-io}
members=$(jq -r --arg reg "$target" '
  [.packages[] | select(.source == null)] as $ws
  | ($ws | map({(.name): .version}) | add) as $version
  | $ws[]
  | select(.publish == null or (.publish | index($reg)))
  | [.name, .version,
     ([.dependencies[]
       | select(.path != null and $version[.name] != null and (.kind != "dev" or .req != "*"))
       | .name] - [.name] | unique | map(. + "@" + $version[.]) | join(" "))]
  | @tsv' <<<"$meta")
[ -n "$members" ] || die "no member of this workspace may be published to $where"

declare -A version deps
names=()
while IFS=$'\t' read -r name ver needs; do
  names+=("$name")
  version[$name]=$ver
  deps[$name]=$needs
done <<<"$members"

# Placeholder repository: crates.io keeps a version's metadata for good.
placeholder=$(jq -r '.packages[] | select(.source == null and ((.repository // "") | test("github\\.com/OWNER/"))) | .name' <<<"$meta")
if [ -n "$placeholder" ]; then
  if [ -z "$registry" ]; then
    die "the \`repository\` of $(echo $placeholder | sed 's/ /, /g') is still the placeholder https://github.com/OWNER/gate, which crates.io would show for every version published now" \
      "set \`repository\` in Cargo.toml ([package] and [workspace.package]) to the real repository and tag again"
  fi
  echo "note: \`repository\` is still the OWNER placeholder; allowed for $where, refused for crates.io" >&2
fi

# Dependency order: each round takes, by name, every crate whose workspace
# dependencies are all placed.
order=()
declare -A placed
while [ ${#order[@]} -lt ${#names[@]} ]; do
  round=()
  for name in "${names[@]}"; do
    [ -z "${placed[$name]:-}" ] || continue
    ready=1
    for dep in ${deps[$name]}; do
      d=${dep%@*}
      if [ -n "${version[$d]:-}" ] && [ -z "${placed[$d]:-}" ]; then ready=0; fi
    done
    [ $ready = 0 ] || round+=("$name")
  done
  [ ${#round[@]} -gt 0 ] || die "the workspace's dependencies form a cycle among: ${names[*]}"
  while read -r name; do
    order+=("$name")
    placed[$name]=1
  done < <(printf '%s\n' "${round[@]}" | sort)
done

declare -A wanted
if [ ${#selected[@]} -gt 0 ]; then
  for name in "${selected[@]}"; do
    [ -n "${version[$name]:-}" ] || die "\`$name\` is not a member of this workspace that may be published to $where" "members: ${order[*]}"
    wanted[$name]=1
  done
else
  for name in "${order[@]}"; do wanted[$name]=1; done
fi

# Whether the index lists NAME at VERSION. A registry answers 404, 410 or 451
# for a crate it does not have (cargo's "Registry Index" reference).
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tmp=$work/index-file
log=$work/publish.log
on_index() {
  local name=${1,,} path code
  case ${#name} in
    1) path="1/$name" ;;
    2) path="2/$name" ;;
    3) path="3/${name:0:1}/$name" ;;
    *) path="${name:0:2}/${name:2:2}/$name" ;;
  esac
  code=$(curl -sS --max-time 60 --retry 3 -o "$tmp" -w '%{http_code}' "$index$path") ||
    die "could not read $index_shown$path (curl, above)" "the index must be reachable to tell what is already published"
  case $code in
    200)
      jq -se --arg v "$2" 'any(.[]; .vers == $v)' "$tmp" >/dev/null && return 0
      [ $? = 1 ] || die "$index_shown$path is not an index file (JSON lines)"
      return 1
      ;;
    404 | 410 | 451) return 1 ;;
    *) die "$index_shown$path answered HTTP $code" "the index must be readable to tell what is already published" ;;
  esac
}

published=()
skipped=()
declare -A here
for name in "${order[@]}"; do
  [ -n "${wanted[$name]:-}" ] || continue
  ver=${version[$name]}
  if on_index "$name" "$ver"; then
    echo "$name $ver: already on $where, skipped"
    skipped+=("$name")
    here[$name]=1
    continue
  fi
  missing=()
  for dep in ${deps[$name]}; do
    d=${dep%@*}
    [ -n "${here[$d]:-}" ] || on_index "$d" "${dep#*@}" || missing+=("$d ${dep#*@}")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    list=$(printf '%s, ' "${missing[@]}")
    die "$name $ver depends on ${list%, }, which $where does not have and this run does not publish before it" \
      "publish them first: scripts/publish.sh with no package names publishes every crate in dependency order"
  fi
  echo "$name $ver: publishing to $where"
  if "$cargo" publish -p "$name" "${publish_to[@]}" "${cargo_flags[@]}" 2>&1 | tee "$log"; then
    published+=("$name")
  # An upload from an earlier attempt that the index did not show yet:
  # cargo's own check ("already exists on ... index") or the registry's
  # answer to the upload ("already uploaded"), or the index now listing it.
  elif grep -qE 'already exists on|already uploaded' "$log" || on_index "$name" "$ver"; then
    echo "$name $ver: already on $where (uploaded by an earlier attempt), skipped"
    skipped+=("$name")
  else
    done_list=$(printf '%s\n' "${skipped[@]}" "${published[@]}" | sed '/^$/d' | paste -sd ' ')
    die "\`cargo publish -p $name\` failed (above); on $where now: ${done_list:-none}" \
      "fix the cause and run again: what is on the registry is skipped"
  fi
  here[$name]=1
done
echo "published: ${published[*]:-none}; already there: ${skipped[*]:-none}"

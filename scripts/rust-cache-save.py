#!/usr/bin/env python3
"""What Swatinem/rust-cache leaves of target/ when it saves the cache.

A model of the pinned action (v2.9.1, c19371144df3bb44fab255c43d04cbc2ab54d1c4,
the one .github/workflows/ci.yml uses), so that a warm `.ci/run` measured here
starts from what a pull request's job restores, not from the whole target/ a
cold run left. Read from the action's source at that commit:

- src/save.ts: for each workspace (ours: "." -> target), the packages kept are
  those `cargo metadata --all-features` lists outside the workspace root (the
  dependencies), plus the workspace members (`--no-deps`) when
  `cache-workspace-crates` is true; then `cleanTargetDir(target, packages)`.
- src/cleanup.ts: `cleanTargetDir` removes every file at the target's top,
  recurses into nested target folders (those holding CACHEDIR.TAG or
  .rustc_info.json), and cleans every other folder as a profile: only
  `build/`, `.fingerprint/` and `deps/` stay; in `build/` and `.fingerprint/`
  an entry stays when its name less its last `-suffix` is a kept package's
  name; in `deps/` when it is a kept package's or lib/proc-macro target's name
  (dashes as underscores), bare or with `lib` before it.
- `cache-directories` (ours: ~/.npm) are saved whole.

Usage: rust-cache-save.py TARGET [--workspace-crates]
Run from the workspace root. It deletes, as the action does.
"""

import json
import os
import shutil
import subprocess
import sys

SAVE_TARGETS = {"lib", "proc-macro"}


def packages(root, no_deps):
    cmd = ["cargo", "metadata", "--all-features", "--format-version", "1"]
    if no_deps:
        cmd.append("--no-deps")
    env = dict(os.environ, CARGO_ENCODED_RUSTFLAGS="")
    meta = json.loads(subprocess.run(cmd, cwd=root, env=env, check=True, capture_output=True).stdout)
    out = []
    for p in meta["packages"]:
        if not no_deps and p["manifest_path"].startswith(root):
            continue
        targets = [t["name"] for t in p["targets"] if SAVE_TARGETS & set(t["kind"])]
        out.append((p["name"], targets))
    return out


def rm(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except OSError:
            pass


def rm_except(folder, keep):
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        stem = name[: name.rindex("-")] if "-" in name else name
        if stem not in keep:
            rm(os.path.join(folder, name))


def clean_profile(profile, pkgs):
    if os.path.basename(profile) == "tests":
        for nested in ("target", "trybuild"):
            if os.path.isdir(os.path.join(profile, nested)):
                clean_target(os.path.join(profile, nested), pkgs)
        rm_except(profile, {"target", "trybuild"})
        return
    # The profile's own entries: only build/, .fingerprint/ and deps/ stay
    # (rmExcept strips a last `-suffix` here too, as the action does).
    rm_except(profile, {"build", ".fingerprint", "deps"})
    keep_pkg = {name for name, _ in pkgs}
    rm_except(os.path.join(profile, "build"), keep_pkg)
    rm_except(os.path.join(profile, ".fingerprint"), keep_pkg)
    keep_deps = set()
    for name, targets in pkgs:
        for n in [name, *targets]:
            n = n.replace("-", "_")
            keep_deps.update({n, "lib" + n})
    rm_except(os.path.join(profile, "deps"), keep_deps)


def clean_target(target, pkgs):
    for name in os.listdir(target):
        path = os.path.join(target, name)
        if os.path.isdir(path) and not os.path.islink(path):
            nested = os.path.exists(os.path.join(path, "CACHEDIR.TAG")) or os.path.exists(
                os.path.join(path, ".rustc_info.json")
            )
            if nested:
                clean_target(path, pkgs)
            else:
                clean_profile(path, pkgs)
        elif name != "CACHEDIR.TAG":
            rm(path)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    target = os.path.abspath(sys.argv[1])
    root = os.getcwd()
    pkgs = packages(root, no_deps=False)
    if "--workspace-crates" in sys.argv[2:]:
        pkgs += packages(root, no_deps=True)
    clean_target(target, pkgs)


if __name__ == "__main__":
    main()

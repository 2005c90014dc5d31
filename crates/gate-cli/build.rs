//! Embeds what `gate --version` reports: the git commit the binary was built
//! from and the CUDA compute capability of a `cuda` build. Never fails: a
//! tarball, a shallow CI clone or a missing `git` give "unknown".

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// Asks cargo to run this script again when HEAD moves (a checkout or a
/// commit), watching only files that exist: a missing path would make
/// cargo rerun it, and rebuild the crate, on every build.
fn watch_git_head() {
    let Some(git_dir) = git(&["rev-parse", "--git-dir"]).map(PathBuf::from) else {
        return;
    };
    let head = git_dir.join("HEAD");
    let watch = |p: &Path| {
        if p.exists() {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    };
    watch(&head);
    if let Ok(text) = std::fs::read_to_string(&head) {
        if let Some(r) = text.strip_prefix("ref:") {
            // A branch: its ref file (loose) or packed-refs (after `git gc`).
            let common = git(&["rev-parse", "--git-common-dir"])
                .map(PathBuf::from)
                .unwrap_or(git_dir.clone());
            watch(&common.join(r.trim()));
            watch(&common.join("packed-refs"));
        }
    }
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // A release built outside a git checkout may name its commit.
    println!("cargo:rerun-if-env-changed=GATE_BUILD_COMMIT");
    println!("cargo:rerun-if-env-changed=CUDA_COMPUTE_CAP");
    let commit = match std::env::var("GATE_BUILD_COMMIT") {
        Ok(c) if !c.trim().is_empty() => c.trim().chars().take(12).collect(),
        _ => {
            watch_git_head();
            git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into())
        }
    };
    println!("cargo:rustc-env=GATE_GIT_COMMIT={commit}");
    let cap = std::env::var("CUDA_COMPUTE_CAP").unwrap_or_default();
    let cap = if cap.trim().is_empty() {
        "unknown".to_string()
    } else {
        cap.trim().to_string()
    };
    println!("cargo:rustc-env=GATE_CUDA_COMPUTE_CAP={cap}");
    // Where `gate init` points its workflows: Cargo.toml's `repository`, the
    // one place that names gate's repository. While it still names the
    // placeholder owner `OWNER`, a release built in GitHub Actions takes the
    // repository it was built in (GITHUB_REPOSITORY); GATE_REPOSITORY
    // overrides both. `gate init` refuses to write the placeholder.
    println!("cargo:rerun-if-changed=Cargo.toml");
    // The workspace's manifest holds `repository` in gate's checkout (a
    // missing path would rerun this on every build: watched only if there).
    if Path::new("../../Cargo.toml").is_file() {
        println!("cargo:rerun-if-changed=../../Cargo.toml");
    }
    println!("cargo:rerun-if-env-changed=GATE_REPOSITORY");
    println!("cargo:rerun-if-env-changed=GITHUB_REPOSITORY");
    let valid = |r: &String| {
        let r = r.trim();
        r.split('/').count() == 2 && r.split('/').all(|p| !p.is_empty())
    };
    let manifest = std::env::var("CARGO_PKG_REPOSITORY")
        .unwrap_or_default()
        .trim()
        .trim_start_matches("https://github.com/")
        .trim_end_matches('/')
        .trim_end_matches(".git")
        .to_string();
    let manifest = Some(manifest).filter(valid).unwrap_or_else(|| "OWNER/gate".into());
    let placeholder = manifest.starts_with("OWNER/");
    let repo = std::env::var("GATE_REPOSITORY")
        .ok()
        .filter(valid)
        .or_else(|| (!placeholder).then(|| manifest.clone()))
        .or_else(|| std::env::var("GITHUB_REPOSITORY").ok().filter(valid))
        .unwrap_or(manifest);
    println!("cargo:rustc-env=GATE_REPOSITORY={}", repo.trim());
    println!(
        "cargo:rustc-env=GATE_TARGET={}",
        std::env::var("TARGET").unwrap_or_else(|_| "unknown".into())
    );
}

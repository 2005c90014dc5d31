//! The installed `gate` as built here. The whole command line is tested
//! by the repository's tests/it (which run this crate's binary); this says
//! what the binary is: its version lines, and whether it has the built-in
//! models, which a build without its `builtins` feature lacks.

use std::process::Command;

fn gate(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gate"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("the built gate starts")
}

#[test]
fn version_names_the_commit_the_cuda_build_and_the_repository() {
    let o = gate(&["--version"]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.starts_with(concat!("gate ", env!("CARGO_PKG_VERSION"))), "{text}");
    for line in ["commit: ", "cuda: ", "target: ", "repository: ", "built-in models: "] {
        assert!(text.contains(line), "no `{line}` in {text}");
    }
    // Which build this is: with the built-in models (naming each), or without.
    #[cfg(feature = "builtins")]
    for kind in gate_builtins::KINDS {
        assert!(text.contains("built-in models: yes") && text.contains(kind), "{text}");
    }
    #[cfg(not(feature = "builtins"))]
    assert!(text.contains("built-in models: no"), "{text}");
}

/// A spec without `harness:` runs on the built-ins, which this binary
/// serves itself (`__resolve`), or is refused with a hint where it has none.
#[test]
fn a_spec_without_a_harness_needs_the_built_ins() {
    let dir = tempfile_dir();
    let spec = dir.join("budgets.yaml");
    std::fs::write(
        &spec,
        "version: 1\ndevice: { name: card, capacity: 4 GiB }\ncomponents:\n  m:\n    workload: mlp\n    budgets:\n      params: < 1 MiB\n",
    )
    .unwrap();
    let o = gate(&["validate", "--budgets", spec.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    if cfg!(feature = "builtins") {
        assert!(o.status.success(), "{err}");
    } else {
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("no built-in models") && err.contains("hint:"), "{err}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("gate-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

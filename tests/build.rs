//! The repository's root for the tests (`env!("GATE_REPO_ROOT")`): they read
//! budgets.yaml, the docs, the fixtures and the workflows from there, and
//! this package is one folder below it.

fn main() {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let root = std::path::Path::new(&manifest)
        .parent()
        .expect("tests/ has a parent folder");
    println!("cargo:rustc-env=GATE_REPO_ROOT={}", root.display());
    println!("cargo:rerun-if-changed=build.rs");
}

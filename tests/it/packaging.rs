//! Packaging through the built binary: `--version`, `doctor`, `init`,
//! completions and the man page; and the structure of the GitHub Action
//! (action.yml is not a workflow, so actionlint does not read it).

use crate::common;

use crate::common::text;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use yaml_rust2::{Yaml, YamlLoader};

fn gate_in(dir: &Path, args: &[&str]) -> Output {
    common::gate()
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the gate binary runs")
}

fn gate(args: &[&str]) -> Output {
    gate_in(Path::new(env!("GATE_REPO_ROOT")), args)
}

#[test]
fn version_names_the_version_the_commit_and_cuda() {
    let o = gate(&["--version"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(
        out.starts_with(&format!("gate {}\n", env!("CARGO_PKG_VERSION"))),
        "{out}"
    );
    let commit = out
        .lines()
        .find_map(|l| l.strip_prefix("commit: "))
        .expect("a commit line");
    assert!(
        commit == "unknown" || (commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{commit}"
    );
    let cuda = out.lines().find_map(|l| l.strip_prefix("cuda: ")).expect("a cuda line");
    assert_eq!(cuda.starts_with("yes"), cfg!(feature = "cuda"), "{out}");
    // -V stays the short form.
    let o = gate(&["-V"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(text(&o.stdout).trim(), format!("gate {}", env!("CARGO_PKG_VERSION")));
}

#[test]
fn doctor_describes_the_machine_and_what_it_can_measure() {
    let o = gate(&["doctor"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    for needle in [
        "machine",
        "cpu:",
        "cores:",
        "memory:",
        "gpu",
        "what a run here can measure",
        "--backend cpu:  yes",
    ] {
        assert!(out.contains(needle), "missing `{needle}` in:\n{out}");
    }
    if !cfg!(feature = "cuda") {
        assert!(out.contains("CPU build (no CUDA)"), "{out}");
        assert!(out.contains("hint:") && out.contains("`cuda` build"), "{out}");
        assert!(out.contains("--backend auto: cpu"), "{out}");
        // --require-gpu: infrastructure failure with the same hint.
        let o = gate(&["doctor", "--require-gpu"]);
        assert_eq!(o.status.code(), Some(3));
        assert!(text(&o.stderr).contains("--require-gpu"), "{}", text(&o.stderr));
    }
}

#[test]
fn completions_and_man_page_come_from_the_clap_definition() {
    for shell in ["bash", "zsh", "fish"] {
        let o = gate(&["completions", shell]);
        assert_eq!(o.status.code(), Some(0), "{shell}: {}", text(&o.stderr));
        let out = text(&o.stdout);
        assert!(out.len() > 200, "{shell}: {out}");
        for sub in ["check", "validate", "doctor", "init"] {
            assert!(out.contains(sub), "{shell} completions lack `{sub}`");
        }
    }
    let o = gate(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2), "an unknown shell is bad input");

    let o = gate(&["man"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let man = text(&o.stdout);
    assert!(
        man.starts_with(".ie") || man.contains(".TH gate"),
        "{}",
        &man[..man.len().min(300)]
    );
    for needle in [
        ".SH NAME",
        ".SH SYNOPSIS",
        "GATE CHECK",
        "\\-\\-budgets",
        "\\-\\-strict",
        "EXIT STATUS",
    ] {
        assert!(man.contains(needle), "man page lacks `{needle}`");
    }
}

/// Every key the spec format knows, as written in the starter.
const SPEC_KEYS: &[&str] = &[
    "version:",
    "device:",
    "name:",
    "capacity:",
    "reserve:",
    "emulate:",
    "defaults:",
    "dtype:",
    "batch_size:",
    "tolerance:",
    "seed:",
    "timing:",
    "components:",
    "workload:",
    "config:",
    "budgets:",
    "params:",
    "activations:",
    "gradients:",
    "optimizer:",
    "training_peak:",
    "inference_peak:",
    "device_used:",
    "step_time:",
    "loss:",
    "ensemble:",
    "members:",
    "metric:",
    "processes:",
    "total:",
    "headroom:",
];

#[test]
fn init_writes_a_valid_commented_spec_and_the_workflows_and_never_overwrites() {
    let t = tempfile::tempdir().unwrap();
    let o = gate_in(t.path(), &["init", "--gate-repo", "acme/gate", "--gate-ref", "v9.9.9"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    // The first PR gets no comment: init says so (GitHub runs `workflow_run` from the default branch only).
    assert!(
        text(&o.stderr).contains(
            "  note: the pull request that adds these workflows gets no comment (GitHub runs the `workflow_run` \
             comment workflow only from the default branch); its results are in the run's job summary and \
             artifact, and comments start once it is merged\n"
        ),
        "{}",
        text(&o.stderr)
    );
    let spec = std::fs::read_to_string(t.path().join("budgets.yaml")).unwrap();
    for key in SPEC_KEYS {
        assert!(spec.contains(key), "the starter spec lacks `{key}`");
    }
    assert!(spec.lines().filter(|l| l.contains('#')).count() >= 20, "commented");

    let wf = std::fs::read_to_string(t.path().join(".github/workflows/gate.yml")).unwrap();
    assert!(
        wf.contains("uses: acme/gate/.github/workflows/gate-reusable.yml@v9.9.9"),
        "{wf}"
    );
    // No placeholder left unfilled (`${{ ... }}` is a GitHub expression).
    assert!(!wf.replace("${{", "").contains("{{"), "{wf}");
    let comment = std::fs::read_to_string(t.path().join(".github/workflows/gate-comment.yml")).unwrap();
    assert!(comment.contains("uses: acme/gate@v9.9.9"), "{comment}");
    // The comment workflow follows the gate workflow by its name.
    let wf_yaml = &YamlLoader::load_from_str(&wf).unwrap()[0];
    let c_yaml = &YamlLoader::load_from_str(&comment).unwrap()[0];
    let name = wf_yaml["name"].as_str().unwrap();
    let follows = &c_yaml["on"]["workflow_run"]["workflows"][0];
    assert_eq!(follows.as_str(), Some(name));
    // The reusable workflow's inputs that the starter sets exist.
    let reusable = load(".github/workflows/gate-reusable.yml");
    let declared = keys(&reusable["on"]["workflow_call"]["inputs"]);
    for job in ["pr", "baseline"] {
        for k in keys(&wf_yaml["jobs"][job]["with"]) {
            assert!(
                declared.contains(&k),
                "gate.yml sets `{k}`, which gate-reusable.yml does not declare"
            );
        }
    }

    let o = gate_in(t.path(), &["validate"]);
    assert_eq!(o.status.code(), Some(0), "the starter validates: {}", text(&o.stderr));
    assert!(text(&o.stderr).is_empty(), "no warnings: {}", text(&o.stderr));

    // The first check passes.
    let o = gate_in(t.path(), &["check", "--baseline", "none", "--out", "out"]);
    assert_eq!(o.status.code(), Some(0), "{}\n{}", text(&o.stdout), text(&o.stderr));
    assert!(t.path().join("out/report.json").exists());

    // A second init refuses, with a hint; --force overwrites.
    std::fs::write(t.path().join("budgets.yaml"), "mine").unwrap();
    let o = gate_in(t.path(), &["init", "--gate-repo", "acme/gate"]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains("not overwriting") && err.contains("hint:") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(t.path().join("budgets.yaml")).unwrap(), "mine");
    let o = gate_in(t.path(), &["init", "--force", "--no-workflows"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(std::fs::read_to_string(t.path().join("budgets.yaml")).unwrap(), spec);

    // --dir writes elsewhere.
    let o = gate_in(t.path(), &["init", "--dir", "sub/repo", "--gate-repo", "acme/gate"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(t.path().join("sub/repo/.github/workflows/gate.yml").exists());
    // Names that would land in YAML unchecked are refused.
    let o = gate_in(t.path(), &["init", "--dir", "x", "--gate-ref", "v1\n  evil: 1"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn init_never_writes_the_placeholder_owner() {
    let t = tempfile::tempdir().unwrap();
    let o = gate_in(t.path(), &["init", "--gate-repo", "OWNER/gate"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        text(&o.stderr),
        "error: gate does not know which GitHub repository it comes from (`OWNER/gate`, the placeholder of \
         gate's Cargo.toml), so the workflows' `uses:` lines would name a repository that does not exist\n\
         hint: pass `--gate-repo OWNER/NAME`, the GitHub repository you take gate from (e.g. `--gate-repo \
         acme/gate`); or `--no-workflows` to write budgets.yaml alone\n"
    );
    assert!(std::fs::read_dir(t.path()).unwrap().next().is_none(), "nothing written");

    // A harness's git dependency would name it too.
    std::fs::write(
        t.path().join("Cargo.toml"),
        "[package]\nname = \"m\"\nversion = \"0.1.0\"\n",
    )
    .unwrap();
    let o = gate_in(
        t.path(),
        &["init", "--harness", "--no-workflows", "--gate-repo", "OWNER/gate"],
    );
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        text(&o.stderr),
        "error: gate does not know which GitHub repository it comes from (`OWNER/gate`, the placeholder of \
         gate's Cargo.toml), so the harness's gate dependency would name a repository that does not exist\n\
         hint: pass `--gate-repo OWNER/NAME`, the GitHub repository you take gate from (e.g. `--gate-repo \
         acme/gate`), or with `--no-workflows` a gate checkout's path or a git URL\n"
    );
    assert!(!t.path().join("budgets.yaml").exists());

    // budgets.yaml alone names no repository.
    let o = gate_in(t.path(), &["init", "--no-workflows", "--gate-repo", "OWNER/gate"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(t.path().join("budgets.yaml").exists());
    assert!(!t.path().join(".github").exists());
}

#[test]
fn version_names_the_repository_init_takes_gate_from() {
    let out = text(&gate(&["--version"]).stdout);
    let repo = out
        .lines()
        .find_map(|l| l.strip_prefix("repository: "))
        .expect("a repository line");
    // Cargo.toml's `repository`, unless it is still the placeholder and the
    // build named another (GATE_REPOSITORY, or GITHUB_REPOSITORY in Actions).
    let manifest = include_str!("../../Cargo.toml");
    let url = manifest
        .lines()
        .find_map(|l| l.strip_prefix("repository = \""))
        .expect("Cargo.toml names the repository")
        .trim_end_matches('"');
    let named = url.trim_start_matches("https://github.com/");
    if !named.starts_with("OWNER/") {
        assert_eq!(repo, named, "{out}");
    }
    assert_eq!(repo.split('/').filter(|p| !p.is_empty()).count(), 2, "{out}");
}

fn load(rel: &str) -> Yaml {
    let path = Path::new(env!("GATE_REPO_ROOT")).join(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{rel}: {e}"));
    YamlLoader::load_from_str(&text).unwrap().remove(0)
}

fn keys(y: &Yaml) -> BTreeSet<String> {
    y.as_hash()
        .map(|h| h.keys().filter_map(|k| k.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// `${{ inputs.NAME` / `steps.ID.outputs` references in a text.
fn refs(text: &str, prefix: &str) -> BTreeSet<String> {
    text.match_indices(prefix)
        // `steps.inputs.outputs` is not an `inputs.` reference.
        .filter(|(i, _)| !text[..*i].ends_with(|c: char| c == '.' || c == '_' || c.is_ascii_alphanumeric()))
        .map(|(i, _)| {
            text[i + prefix.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .collect::<String>()
        })
        .filter(|name| !name.is_empty())
        .collect()
}

#[test]
fn the_composite_action_is_well_formed() {
    let root = Path::new(env!("GATE_REPO_ROOT"));
    let atext = std::fs::read_to_string(root.join("action.yml")).unwrap();
    let action = load("action.yml");
    assert!(action["name"].as_str().is_some() && action["description"].as_str().is_some());
    assert_eq!(action["runs"]["using"].as_str(), Some("composite"));
    let inputs = keys(&action["inputs"]);
    for i in [
        "budgets", "backend", "baseline", "comment", "strict", "command", "version",
    ] {
        assert!(inputs.contains(i), "input `{i}`");
    }
    for (name, spec) in action["inputs"].as_hash().unwrap() {
        assert!(
            spec["description"].as_str().is_some(),
            "input {name:?} has a description"
        );
    }
    for r in refs(&atext, "inputs.") {
        assert!(inputs.contains(&r), "action.yml uses undeclared `inputs.{r}`");
    }
    let steps = action["runs"]["steps"].as_vec().unwrap();
    let ids: BTreeSet<String> = steps
        .iter()
        .filter_map(|s| s["id"].as_str().map(str::to_string))
        .collect();
    for r in refs(&atext, "steps.") {
        assert!(ids.contains(&r), "action.yml uses unknown `steps.{r}`");
    }
    for s in steps {
        let label = s["name"].as_str().or(s["uses"].as_str()).unwrap_or("?");
        assert!(s["name"].as_str().is_some() || s["uses"].as_str().is_some(), "{s:?}");
        if s["run"].as_str().is_some() {
            assert!(s["shell"].as_str().is_some(), "composite step `{label}` needs `shell`");
            assert!(s["uses"].is_badvalue(), "`{label}`: run and uses");
        } else {
            assert!(s["uses"].as_str().is_some(), "`{label}`: neither run nor uses");
        }
    }
    for (name, o) in action["outputs"].as_hash().unwrap() {
        assert!(o["value"].as_str().is_some(), "composite output {name:?} needs `value`");
    }
    // The scripts it runs exist, are executable and parse.
    for script in refs(&atext, "$ACTION_PATH/scripts/action/") {
        let p = root.join("scripts/action").join(format!("{script}.sh"));
        assert!(p.exists(), "{}", p.display());
    }
    for entry in std::fs::read_dir(root.join("scripts"))
        .unwrap()
        .chain(std::fs::read_dir(root.join("scripts/action")).unwrap())
    {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "sh") {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&p).unwrap().permissions().mode();
            assert!(mode & 0o111 != 0, "{} is executable", p.display());
            let o = Command::new("bash").arg("-n").arg(&p).output().unwrap();
            assert!(o.status.success(), "{}: {}", p.display(), text(&o.stderr));
        }
    }
    // The reusable workflow passes only inputs the action declares.
    let reusable = load(".github/workflows/gate-reusable.yml");
    let steps = reusable["jobs"]["gate"]["steps"].as_vec().unwrap();
    let call = steps
        .iter()
        .find(|s| s["uses"].as_str() == Some("./.gate-action"))
        .expect("uses the action");
    for k in keys(&call["with"]) {
        assert!(
            inputs.contains(&k),
            "gate-reusable.yml passes `{k}`, which action.yml does not declare"
        );
    }
    let declared = keys(&reusable["on"]["workflow_call"]["inputs"]);
    let rtext = std::fs::read_to_string(root.join(".github/workflows/gate-reusable.yml")).unwrap();
    for r in refs(&rtext, "inputs.") {
        assert!(declared.contains(&r), "gate-reusable.yml uses undeclared `inputs.{r}`");
    }
}

/// A library crate `name` at `dir` whose one dependency is candle-core as
/// `requirement` (a TOML value: `"=0.9.1"`, `{ version = "0.10" }`).
fn candle_crate(dir: &Path, name: &str, requirement: &str) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\ncandle-core = {requirement}\n\n[workspace]\n"
        ),
    )
    .unwrap();
    std::fs::write(dir.join("src/lib.rs"), "").unwrap();
}

/// `gate init --harness --no-workflows` in `dir`, gate from GitHub: it
/// passes, and the crate's manifest is returned.
fn init_harness_from_github(dir: &Path) -> (Output, String) {
    let o = gate_in(
        dir,
        &["init", "--harness", "--no-workflows", "--gate-repo", "acme/gate"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    (o, manifest)
}

/// A crate on candle 0.9.1 gets gate's adapter for it, from a checkout's path.
#[test]
fn init_harness_picks_the_crates_candle_and_takes_a_checkouts_path() {
    let t = tempfile::tempdir().unwrap();
    let krate = t.path().join("forecasting");
    candle_crate(&krate, "forecasting", r#""=0.9.1""#);
    // A copy of gate's manifest stands for the checkout: only its presence is checked.
    let checkout = t.path().join("gate");
    std::fs::create_dir_all(&checkout).unwrap();
    std::fs::copy(
        Path::new(env!("GATE_REPO_ROOT")).join("Cargo.toml"),
        checkout.join("Cargo.toml"),
    )
    .unwrap();
    let o = gate_in(
        &krate,
        &["init", "--harness", "--no-workflows", "--gate-repo", "../gate"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let manifest = std::fs::read_to_string(krate.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains(
            r#"gate-sdk = { path = "../gate/crates/gate-sdk", default-features = false, features = ["candle-0-9-1"] }"#
        ),
        "{manifest}"
    );
    // The workflows need a GitHub repository; a path cannot be `uses:`d.
    let o = gate_in(&krate, &["init", "--harness", "--force", "--gate-repo", "../gate"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("hint: pass `--no-workflows`"),
        "{}",
        text(&o.stderr)
    );
    // A candle of a later 0.9 takes `candle-0-9`, one of 0.10 `candle-0-10`.
    for (req, feature) in [("0.9.2", "candle-0-9"), ("0.10", "candle-0-10")] {
        let dir = t.path().join(format!("c{feature}"));
        candle_crate(&dir, "m", &format!(r#"{{ version = "{req}" }}"#));
        let (_, manifest) = init_harness_from_github(&dir);
        assert!(
            manifest.contains(&format!(r#"features = ["{feature}"]"#)),
            "{req}: {manifest}"
        );
    }
    // A candle the SDK does not serve (0.12, by its declared versions) gets
    // the SDK's default feature and a note, not a feature made up from the
    // version's number.
    let dir = t.path().join("unserved");
    candle_crate(&dir, "m", r#""0.12""#);
    let (o, manifest) = init_harness_from_github(&dir);
    assert!(manifest.contains(r#"features = ["candle-0-11"]"#), "{manifest}");
    assert!(!manifest.contains("candle-0-12"), "{manifest}");
    assert!(
        text(&o.stderr).contains("candle 0.12, which gate's adapter does not serve"),
        "{}",
        text(&o.stderr)
    );
}

/// A harness whose crate is on another candle than gate's is refused before
/// cargo builds anything, naming both versions and the feature to pick.
#[test]
fn a_harness_on_another_candle_is_named_before_the_build() {
    let t = tempfile::tempdir().unwrap();
    let root = Path::new(env!("GATE_REPO_ROOT"));
    std::fs::create_dir_all(t.path().join("src")).unwrap();
    std::fs::write(
        t.path().join("Cargo.toml"),
        format!(
            "[package]\nname = \"forecasting\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\ncandle-core = \"=0.9.1\"\ngate-sdk = {{ path = {:?} }}\n\n[workspace]\n",
            root.join("crates/gate-sdk").display().to_string()
        ),
    )
    .unwrap();
    std::fs::write(t.path().join("src/lib.rs"), "").unwrap();
    std::fs::write(
        t.path().join("budgets.yaml"),
        "version: 1\nharness: { package: forecasting, bin: gate-harness }\n\
         device: { name: card, capacity: 4 GiB, reserve: 300 MiB }\n\
         components:\n  m:\n    workload: mine\n    budgets: { params: < 1 MB }\n",
    )
    .unwrap();
    // Resolving candle 0.9.1 needs the registry's index (or a cached one).
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let resolves = Command::new(cargo)
        .args(["metadata", "--format-version", "1"])
        .current_dir(t.path())
        .output()
        .is_ok_and(|o| o.status.success());
    if !resolves {
        eprintln!("skipped: `cargo metadata` cannot resolve candle-core 0.9.1 here (no registry)");
        return;
    }
    let o = gate_in(t.path(), &["check"]);
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("`forecasting` depends on candle-core 0.9.1, and gate is built against candle-core 0.11.1"),
        "{stderr}"
    );
    assert!(stderr.contains(r#"features = ["candle-0-9-1"]"#), "{stderr}");
    assert!(!stderr.contains("building the harness"), "{stderr}");
}

/// `cargo metadata --no-deps` of the workspace.
fn workspace_metadata() -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let o = Command::new(cargo)
        .args(["metadata", "--no-deps", "--format-version", "1", "--offline"])
        .current_dir(env!("GATE_REPO_ROOT"))
        .output()
        .expect("cargo runs");
    assert!(o.status.success(), "{}", text(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("cargo metadata is JSON")
}

/// The paths `include_str!`/`include_bytes!` name in the `.rs` files under
/// `dir`, resolved from each file's folder: what a package must hold to build
/// (and to run its unit tests).
fn included_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            included_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let src = std::fs::read_to_string(&path).unwrap();
            for macro_ in ["include_str!(\"", "include_bytes!(\""] {
                for (i, _) in src.match_indices(macro_) {
                    let rest = &src[i + macro_.len()..];
                    let rel = &rest[..rest.find('"').unwrap()];
                    out.push(path.parent().unwrap().join(rel));
                }
            }
        }
    }
}

/// crates.io (issue #25 item 6): every crate of the workspace packs, in
/// dependency order (what `cargo publish --workspace` uploads in), and each
/// package holds its sources and what they include, and nothing of the
/// repository around them (tests and their fixtures, examples, fuzz, docs,
/// scripts, CI, build outputs). `.ci/run` verifies the packages build.
#[test]
fn every_crate_packs_in_dependency_order_with_only_what_it_needs() {
    let root = Path::new(env!("GATE_REPO_ROOT"));
    let out = tempfile::tempdir().unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // Packing resolves each package's lock against the registry's index:
    // the cached one first, crates.io when there is none.
    let pack = |offline: bool| {
        let mut cmd = Command::new(&cargo);
        cmd.args(["package", "--workspace", "--no-verify", "--allow-dirty", "--target-dir"])
            .arg(out.path())
            .current_dir(root);
        if offline {
            cmd.arg("--offline");
        }
        cmd.output().expect("cargo runs")
    };
    let mut o = pack(true);
    if !o.status.success() {
        o = pack(false);
    }
    let why = (!o.status.success()).then(|| {
        let err = text(&o.stderr);
        let first = err
            .lines()
            .find(|l| l.starts_with("error"))
            .unwrap_or("failed")
            .to_string();
        format!("`cargo package --workspace` needs crates.io's index or a cached one: {first}")
    });
    if !common::available("every_crate_packs_in_dependency_order_with_only_what_it_needs", why) {
        return;
    }
    let err = text(&o.stderr);
    let order: Vec<&str> = err
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Packaging "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();

    let meta = workspace_metadata();
    // `publish = false` (the tests' package) reads as an empty list of registries.
    let packages: Vec<&serde_json::Value> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["publish"].as_array().is_none_or(|r| !r.is_empty()))
        .collect();
    let names: BTreeSet<&str> = packages.iter().map(|p| p["name"].as_str().unwrap()).collect();
    let order: Vec<&str> = order.into_iter().filter(|n| names.contains(n)).collect();
    assert_eq!(order.iter().copied().collect::<BTreeSet<_>>(), names, "{err}");
    assert_eq!(order.len(), names.len(), "each crate packed once:\n{err}");
    for p in &packages {
        let name = p["name"].as_str().unwrap();
        let at = order.iter().position(|n| *n == name).unwrap();
        for d in p["dependencies"].as_array().unwrap() {
            let dep = d["name"].as_str().unwrap();
            if d["kind"].as_str() != Some("dev") && names.contains(dep) {
                let dep_at = order.iter().position(|n| *n == dep).unwrap();
                assert!(
                    dep_at < at,
                    "`{name}` is packed before its dependency `{dep}`: {order:?}"
                );
            }
        }
    }

    for p in packages {
        let (name, version) = (p["name"].as_str().unwrap(), p["version"].as_str().unwrap());
        let dir = Path::new(p["manifest_path"].as_str().unwrap()).parent().unwrap();
        let krate = out.path().join(format!("package/{name}-{version}.crate"));
        let list = Command::new("tar").arg("-tzf").arg(&krate).output().expect("tar runs");
        assert!(list.status.success(), "{}: {}", krate.display(), text(&list.stderr));
        let prefix = format!("{name}-{version}/");
        let files: BTreeSet<String> = text(&list.stdout)
            .lines()
            .filter_map(|l| l.strip_prefix(&prefix))
            .filter(|l| !l.is_empty() && !l.ends_with('/'))
            .map(str::to_string)
            .collect();
        let allowed = |f: &str| {
            ["src/", "benches/", "testdata/"].iter().any(|d| f.starts_with(d))
                || [
                    "Cargo.toml",
                    "Cargo.toml.orig",
                    "Cargo.lock",
                    ".cargo_vcs_info.json",
                    "build.rs",
                    "README.md",
                ]
                .contains(&f)
        };
        let stray: Vec<&String> = files.iter().filter(|f| !allowed(f)).collect();
        assert!(stray.is_empty(), "`{name}`'s package holds {stray:?}");
        let main = if name == "gate-cli" {
            "src/main.rs"
        } else {
            "src/lib.rs"
        };
        assert!(files.contains(main), "`{name}`'s package has no {main}: {files:?}");
        let mut included = Vec::new();
        included_files(&dir.join("src"), &mut included);
        for path in included {
            let path = std::fs::canonicalize(&path).unwrap_or(path);
            let rel = path.strip_prefix(dir).map(|r| r.to_string_lossy().into_owned());
            assert!(
                rel.as_ref().is_ok_and(|r| files.contains(r)),
                "`{name}` includes {} and its package does not hold it",
                path.display()
            );
        }
    }
}

/// gate-report's unit tests read a copy of the repository's report fixture
/// inside the crate (its package cannot reach ../../tests): the same bytes.
#[test]
fn the_report_crates_fixture_is_the_repositorys() {
    let root = Path::new(env!("GATE_REPO_ROOT"));
    let ours = std::fs::read(root.join("tests/fixtures/report-h200.json")).unwrap();
    let copy = std::fs::read(root.join("crates/gate-report/testdata/report-h200.json")).unwrap();
    assert!(
        ours == copy,
        "crates/gate-report/testdata/report-h200.json differs from tests/fixtures/report-h200.json: copy it over"
    );
}

/// Every crate of the workspace is a default member (`cargo test` at the
/// root covers it; gate-cli's binary is the `gate` tests/it run) except
/// gate-burn, which needs Rust 1.95
/// and compiles burn (its fixture's test builds it: tests/it/adopter_burn.rs).
#[test]
fn every_crate_but_gate_burn_is_a_default_member() {
    let meta = workspace_metadata();
    let ids = |key: &str| -> BTreeSet<String> {
        meta[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    let name_of = |id: &String| {
        meta["packages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["id"].as_str() == Some(id))
            .map(|p| p["name"].as_str().unwrap().to_string())
            .unwrap()
    };
    let members: BTreeSet<String> = ids("workspace_members").iter().map(name_of).collect();
    let defaults: BTreeSet<String> = ids("workspace_default_members").iter().map(name_of).collect();
    let expected: BTreeSet<String> = members.into_iter().filter(|n| n != "gate-burn").collect();
    assert_eq!(
        defaults, expected,
        "list a new crate in the root Cargo.toml's default-members"
    );
}

/// `gate init --harness` writes into files a team commits: credentials in
/// `--gate-repo` are refused before anything is written, and never
/// printed (#43 item 4).
#[test]
fn init_refuses_credentials_in_the_gate_repo_url() {
    let manifest = "[package]\nname = \"ml\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n";
    for url in [
        "https://user:s3cretpass@git.example.com/acme/gate",
        "https://ghp_s3cretpass@git.example.com/acme/gate",
        "ssh://git:s3cretpass@git.example.com/acme/gate",
        "https://git.example.com/acme/gate?access_token=s3cretpass",
    ] {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("src")).unwrap();
        std::fs::write(t.path().join("Cargo.toml"), manifest).unwrap();
        let o = gate_in(t.path(), &["init", "--harness", "--no-workflows", "--gate-repo", url]);
        let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
        assert_eq!(o.status.code(), Some(2), "{url}: {all}");
        assert!(!all.contains("s3cretpass"), "{url}: {all}");
        assert!(
            all.contains("the URL holds credentials, which gate would write into Cargo.toml"),
            "{all}"
        );
        assert!(all.contains("***"), "{all}");
        assert!(all.contains("hint: pass the URL without them"), "{all}");
        assert_eq!(std::fs::read_to_string(t.path().join("Cargo.toml")).unwrap(), manifest);
        assert!(!t.path().join("budgets.yaml").exists(), "{url}: {all}");
    }
    // An SSH login name alone is not a secret.
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("src")).unwrap();
    std::fs::write(t.path().join("Cargo.toml"), manifest).unwrap();
    let o = gate_in(
        t.path(),
        &[
            "init",
            "--harness",
            "--no-workflows",
            "--gate-repo",
            "ssh://git@git.example.com/acme/gate",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

/// The crate's name goes into budgets.yaml quoted, so a name YAML would read
/// as another type stays a name; a Cargo.toml with a TOML syntax error is
/// said at its line and column (#43 item 15).
#[test]
fn init_quotes_the_package_name_and_places_a_toml_error() {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("src")).unwrap();
    std::fs::write(
        t.path().join("Cargo.toml"),
        "[package]\nname = \"null\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    let o = gate_in(
        t.path(),
        &["init", "--harness", "--no-workflows", "--gate-repo", "acme/gate"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let budgets = std::fs::read_to_string(t.path().join("budgets.yaml")).unwrap();
    assert!(
        budgets.contains("harness: { package: \"null\", bin: gate-harness }"),
        "{budgets}"
    );
    // gate reads back what it wrote: the harness's package is the string `null`.
    let o = gate_in(t.path(), &["validate"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));

    let t = tempfile::tempdir().unwrap();
    std::fs::write(
        t.path().join("Cargo.toml"),
        "[package]\nname = \"ml\"\nversion = 0.1.0\"\n",
    )
    .unwrap();
    let o = gate_in(
        t.path(),
        &["init", "--harness", "--no-workflows", "--gate-repo", "acme/gate"],
    );
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("error: --harness: ./Cargo.toml:3:14: not valid TOML: expected newline"),
        "{stderr}"
    );
    assert!(stderr.contains("hint: fix the manifest"), "{stderr}");
    assert!(!stderr.contains("has no `[package] name`"), "{stderr}");

    // A name cargo would refuse is said at the name.
    std::fs::write(
        t.path().join("Cargo.toml"),
        "[package]\nname = \"ml: {evil: 1}\"\nversion = \"0.1.0\"\n",
    )
    .unwrap();
    let o = gate_in(
        t.path(),
        &["init", "--harness", "--no-workflows", "--gate-repo", "acme/gate"],
    );
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("error: --harness: ./Cargo.toml:2:8: `[package] name` is \"ml: {evil: 1}\", which is not a cargo package name"),
        "{stderr}"
    );
    assert!(!t.path().join("budgets.yaml").exists());
}

/// `cargo binstall gate-cli` (#41 item 15): the templates of
/// `[package.metadata.binstall]` name the archive scripts/package-release.sh
/// makes, and the binary inside it. A release is packed here with stand-in
/// binaries and the templates are resolved as binstall resolves them.
#[test]
fn binstall_finds_the_release_archive_and_the_binary_in_it() {
    let root = Path::new(env!("GATE_REPO_ROOT"));
    let manifest: toml_edit::DocumentMut = std::fs::read_to_string(root.join("crates/gate-cli/Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let meta = &manifest["package"]["metadata"]["binstall"];
    assert_eq!(meta["pkg-fmt"].as_str(), Some("tgz"));
    let (version, target) = ("1.2.3", "x86_64-unknown-linux-gnu");
    let resolve = |t: &str| {
        t.replace("{ repo }", "https://github.com/OWNER/gate")
            .replace("{ version }", version)
            .replace("{ target }", target)
            .replace("{ archive-suffix }", ".tar.gz")
            .replace("{ bin }", "gate")
            .replace("{ binary-ext }", "")
    };
    let url = resolve(meta["pkg-url"].as_str().unwrap());
    let inside = resolve(meta["bin-dir"].as_str().unwrap());

    let t = tempfile::tempdir().unwrap();
    let fake = t.path().join("gate-fake");
    crate::common::write_executable(
        &fake,
        "#!/bin/sh\ncase \"$1\" in --version) printf 'gate 1.2.3\\ncommit: abc\\n';; *) echo x;; esac\n",
    );
    let out = t.path().join("dist");
    let o = Command::new("bash")
        .arg(root.join("scripts/package-release.sh"))
        .args([
            "v1.2.3",
            fake.to_str().unwrap(),
            fake.to_str().unwrap(),
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::output_text(&o));
    let archive = url.rsplit('/').next().unwrap();
    assert_eq!(
        url,
        format!("https://github.com/OWNER/gate/releases/download/v1.2.3/{archive}")
    );
    assert!(
        out.join(archive).is_file(),
        "{archive} among {:?}",
        std::fs::read_dir(&out).unwrap().collect::<Vec<_>>()
    );
    let listing = Command::new("tar").arg("-tzf").arg(out.join(archive)).output().unwrap();
    let names = text(&listing.stdout);
    assert!(names.lines().any(|l| l == inside), "{inside} in {names}");
}

/// A stand-in `minisign` for the signing rehearsal (this machine has none):
/// `-G -W -p PUB -s KEY` writes a key pair in minisign's file layout (a
/// comment line, then the key); `-S -W -s KEY -m FILE -x SIG -t COMMENT`
/// writes a "signature" binding the key, the file's SHA-256 and the
/// comment; `-V -p PUB -m FILE -x SIG` checks it. The real tool's flags, as
/// its manual gives them; the cryptography is not what is rehearsed.
pub(crate) const FAKE_MINISIGN: &str = r#"#!/usr/bin/env bash
set -eu
mode= pub= key= file= sig= comment= nopass= prehash=
while [ $# -gt 0 ]; do
  case $1 in
    -G|-S|-V) mode=$1 ;;
    -W) nopass=1 ;;
    -H) prehash=1 ;;
    -p) pub=$2; shift ;;
    -s) key=$2; shift ;;
    -m) file=$2; shift ;;
    -x) sig=$2; shift ;;
    -t) comment=$2; shift ;;
    -q) ;;
    *) echo "fake minisign: unknown $1" >&2; exit 2 ;;
  esac
  shift
done
case $mode in
  -G) [ -n "$nopass" ] || { echo "would prompt for a password" >&2; exit 3; }
      id=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
      printf 'untrusted comment: minisign public key\nRWQ%s%s\n' "$id" "$(printf 'A%.0s' $(seq 1 21))" > "$pub"
      printf 'untrusted comment: minisign secret key\n%s\n' "$id" > "$key" ;;
  -S) [ -n "$nopass" ] || { echo "would prompt for a password" >&2; exit 3; }
      # The signature's algorithm: ED prehashed (-H, and minisign 0.10's
      # default), Ed the legacy one minisign before 0.10 made for small files.
      alg=Ed; [ -z "$prehash" ] || alg=ED
      printf '%s %s %s %s\n' "$alg" "$(cat "$key" | tail -n1)" "$(sha256sum "$file" | cut -d' ' -f1)" "$comment" > "$sig" ;;
  -V) id=$(tail -n1 "$pub" | cut -c4-35)
      # -H: a legacy signature is refused (minisign 0.10's release notes).
      [ -z "$prehash" ] || [ "$(cut -d' ' -f1 "$sig")" = ED ] || { echo "legacy signature" >&2; exit 1; }
      [ "$(cut -d' ' -f2-3 "$sig")" = "$id $(sha256sum "$file" | cut -d' ' -f1)" ] ;;
esac
"#;

/// `cargo binstall gate-cli` verifies what it downloads (#41 item 15):
/// binstall checks a minisign signature `<archive>.sig` against the key in
/// the published crate's `[package.metadata.binstall.signing]`
/// (cargo-binstall's SIGNING.md). scripts/sign-release.sh signs every
/// archive SHA256SUMS lists with a key made for the release, prints the
/// public key and keeps no secret key; scripts/set-binstall-key.sh writes
/// the public key where binstall reads it. Rehearsed with a stand-in
/// minisign (none here): the files, the names and the key's fate.
#[test]
fn a_release_is_signed_for_binstall_with_a_key_that_is_then_gone() {
    let root = Path::new(env!("GATE_REPO_ROOT"));
    let t = tempfile::tempdir().unwrap();
    let bin = t.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = bin.join("minisign");
    crate::common::write_executable(&fake, FAKE_MINISIGN);
    let tmp = t.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let dist = t.path().join("dist");
    std::fs::create_dir_all(&dist).unwrap();
    let archives = [
        "gate-v1.2.3-x86_64-unknown-linux-gnu.tar.gz",
        "gate-v1.2.3-x86_64-unknown-linux-gnu-cuda.tar.gz",
    ];
    let mut sums = String::new();
    for a in archives {
        std::fs::write(dist.join(a), a.as_bytes()).unwrap();
        sums.push_str(&format!("{}  {a}\n", "0".repeat(64)));
    }
    std::fs::write(dist.join("SHA256SUMS"), &sums).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let sign = |dist: &Path| {
        Command::new("bash")
            .arg(root.join("scripts/sign-release.sh"))
            .arg(dist)
            .arg("v1.2.3")
            .env("PATH", &path)
            .env("TMPDIR", &tmp)
            .output()
            .unwrap()
    };
    let o = sign(&dist);
    assert!(o.status.success(), "{}", common::output_text(&o));
    // binstall fetches `{ url }.sig`: the archive's own name, plus `.sig`.
    for a in archives {
        let sig = std::fs::read_to_string(dist.join(format!("{a}.sig"))).unwrap();
        assert!(sig.ends_with(&format!("gate v1.2.3: {a}\n")), "{sig}");
        // Prehashed (`minisign -S -H`): cargo-binstall verifies with the
        // minisign-verify crate and takes only prehashed signatures (#51).
        assert!(sig.starts_with("ED "), "a legacy signature: {sig}");
    }
    let out = text(&o.stdout);
    let pubkey = out.strip_prefix("pubkey=").unwrap().trim_end().to_string();
    assert_eq!(out.lines().count(), 1, "stdout is the one output line: {out}");
    assert!(pubkey.starts_with("RW") && pubkey.len() == 56, "{pubkey}");
    // The secret key's folder is gone with the script.
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0, "a key was left in TMPDIR");

    // A SHA256SUMS that names a path outside the folder is refused.
    let evil = t.path().join("evil");
    std::fs::create_dir_all(&evil).unwrap();
    std::fs::write(
        evil.join("SHA256SUMS"),
        format!("{}  ../dist/{}\n", "0".repeat(64), archives[0]),
    )
    .unwrap();
    let o = sign(&evil);
    assert_eq!(o.status.code(), Some(1), "{}", common::output_text(&o));
    assert!(text(&o.stderr).contains("not a file of"), "{}", text(&o.stderr));

    // The key, where binstall reads it: gate-cli's manifest, once.
    let manifest = t.path().join("Cargo.toml");
    std::fs::copy(root.join("crates/gate-cli/Cargo.toml"), &manifest).unwrap();
    let set = |key: &str| {
        Command::new("bash")
            .arg(root.join("scripts/set-binstall-key.sh"))
            .arg(key)
            .arg(&manifest)
            .output()
            .unwrap()
    };
    let o = set(&pubkey);
    assert!(o.status.success(), "{}", common::output_text(&o));
    let doc: toml_edit::DocumentMut = std::fs::read_to_string(&manifest).unwrap().parse().unwrap();
    let signing = &doc["package"]["metadata"]["binstall"]["signing"];
    assert_eq!(signing["algorithm"].as_str(), Some("minisign"));
    assert_eq!(signing["pubkey"].as_str(), Some(pubkey.as_str()));
    assert_eq!(doc["package"]["metadata"]["binstall"]["pkg-fmt"].as_str(), Some("tgz"));
    let again = set(&pubkey);
    assert_eq!(again.status.code(), Some(1), "a second key is refused");
    let bad = set("not-a-key");
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        text(&bad.stderr).contains("is not a minisign public key"),
        "{}",
        text(&bad.stderr)
    );
}

/// The release workflow wires the signing: the `release` job signs after
/// its checks and uploads each archive's `.sig`, hands the public key on
/// as an output, and `crates-io` writes it into gate-cli's manifest before
/// packaging anything, then publishes the (so dirty) tree.
#[test]
fn the_release_workflow_signs_for_binstall_and_publishes_the_key() {
    let root = Path::new(env!("GATE_REPO_ROOT"));
    let text = std::fs::read_to_string(root.join(".github/workflows/gate-release.yml")).unwrap();
    let docs = YamlLoader::load_from_str(&text).unwrap();
    let jobs = &docs[0]["jobs"];
    let release = &jobs["release"];
    assert_eq!(
        release["outputs"]["binstall-pubkey"].as_str(),
        Some("${{ steps.sign.outputs.pubkey }}")
    );
    let steps = release["steps"].as_vec().unwrap();
    let at = |id: &str| steps.iter().position(|s| s["id"].as_str() == Some(id)).unwrap();
    let run_at = |needle: &str| {
        steps
            .iter()
            .position(|s| s["run"].as_str().is_some_and(|r| r.contains(needle)))
            .unwrap()
    };
    assert!(
        at("sign") > run_at("sha256sum -c SHA256SUMS"),
        "signed after the files are checked"
    );
    assert!(
        at("sign") < run_at("gh release create"),
        "signed before the release is published"
    );
    let create = steps[run_at("gh release create")]["run"].as_str().unwrap();
    assert!(
        create.contains("\"${sigs[@]}\"") && create.contains("/%/.sig"),
        "{create}"
    );
    // Both the job that builds the packages and the one that publishes
    // them write the key before they pack.
    for (job, last) in [
        ("crates-package", "cargo package --workspace --locked --allow-dirty"),
        ("crates-io", "scripts/publish.sh --no-verify --allow-dirty"),
    ] {
        let crates = jobs[job]["steps"].as_vec().unwrap();
        let crun = |needle: &str| {
            crates
                .iter()
                .position(|s| s["run"].as_str().is_some_and(|r| r.contains(needle)))
                .unwrap_or_else(|| panic!("{job}: no step runs {needle}"))
        };
        let key = crun("scripts/set-binstall-key.sh");
        assert_eq!(
            crates[key]["env"]["PUBKEY"].as_str(),
            Some("${{ needs.release.outputs.binstall-pubkey }}")
        );
        assert!(key < crun("cargo package --workspace --locked --allow-dirty"), "{job}");
        assert!(key < crun(last), "{job}");
    }
}

/// The publishable packages of the workspace: each crate's under crates/
/// (none sets `publish = false`; the tests' package, tests/, does).
fn publishable_crates() -> Vec<String> {
    let root = Path::new(env!("GATE_REPO_ROOT"));
    let mut manifests = Vec::new();
    for e in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        let m = e.path().join("Cargo.toml");
        if m.is_file() {
            manifests.push(m);
        }
    }
    let mut names = Vec::new();
    for m in manifests {
        let doc: toml_edit::DocumentMut = std::fs::read_to_string(&m).unwrap().parse().unwrap();
        if doc["package"].get("publish").and_then(|p| p.as_bool()) != Some(false) {
            names.push(doc["package"]["name"].as_str().unwrap().to_string());
        }
    }
    names
}

/// docs/release.md (#51): the number of crates is the workspace's, it
/// states crates.io's pace for new crates (a first publish of all of them
/// meets it), and the first publish by hand writes the binstall key into
/// gate-cli's manifest before it packs, as the release's jobs do, so the
/// first gate-cli on crates.io names the key its archives are signed with.
#[test]
fn the_release_docs_count_the_crates_give_cratesios_pace_and_key_the_first_publish() {
    let root = Path::new(env!("GATE_REPO_ROOT"));
    let docs = std::fs::read_to_string(root.join("docs/release.md")).unwrap();
    let n = publishable_crates().len();
    assert_eq!(n, 11, "{:?}", publishable_crates());
    assert!(
        docs.contains(&format!("the {n} crates")),
        "docs/release.md names {n} crates"
    );
    for stale in ["ten crates", "all ten", "10 crates"] {
        assert!(!docs.contains(stale), "docs/release.md still says `{stale}`");
    }
    assert!(docs.contains("crates.io takes 5 new crates at once from one account, then one every\n   10 minutes"));
    assert!(docs.contains("https://crates.io/docs/rate-limits"));
    let once = &docs[docs
        .find("#### Once: the first publish")
        .expect("the first publish by hand")..];
    let once = &once[..once.find("\n#### ").unwrap_or(once.len())];
    let key = once
        .find("scripts/set-binstall-key.sh")
        .expect("the first publish writes the binstall key");
    let pack = once.find("cargo package --workspace").unwrap();
    let publish = once.find("scripts/publish.sh --no-verify").unwrap();
    assert!(key < pack && pack < publish, "{once}");
}

/// Release builds run on ubuntu-24.04 (ubuntu-22.04 is retired on
/// 2027-04-17, with brownouts from 2027-03-23), and the glibc floor the
/// docs state is that image's, 2.39.
#[test]
fn release_builds_run_on_ubuntu_24_04_and_the_docs_state_its_glibc() {
    let root = Path::new(env!("GATE_REPO_ROOT"));
    let text = std::fs::read_to_string(root.join(".github/workflows/gate-release.yml")).unwrap();
    let doc = YamlLoader::load_from_str(&text).unwrap().remove(0);
    for (name, job) in doc["jobs"].as_hash().unwrap() {
        let runs_on = &job["runs-on"];
        if let Some(image) = runs_on.as_str() {
            assert!(
                image == "ubuntu-24.04" || image == "ubuntu-latest",
                "{}: runs on {image}",
                name.as_str().unwrap()
            );
        }
    }
    for job in ["build-cpu", "build-cuda", "package"] {
        assert_eq!(doc["jobs"][job]["runs-on"].as_str(), Some("ubuntu-24.04"), "{job}");
    }
    for file in ["README.md", "docs/start.md", "docs/release.md"] {
        let t = std::fs::read_to_string(root.join(file)).unwrap();
        assert!(t.contains("glibc 2.39"), "{file} states the glibc floor");
        assert!(!t.contains("glibc 2.35"), "{file} states the old floor");
    }
}

/// scripts/set-binstall-key.sh appends `[package.metadata.binstall.signing]`:
/// a manifest where that would write a second key table or invalid TOML
/// (the signing table or a key in another TOML form, `binstall` as an
/// inline table) is refused and left as it was (#54 item 6).
#[test]
fn set_binstall_key_refuses_a_key_in_another_toml_form() {
    let root = Path::new(env!("GATE_REPO_ROOT"));
    let t = tempfile::tempdir().unwrap();
    let manifest = t.path().join("Cargo.toml");
    let stock = std::fs::read_to_string(root.join("crates/gate-cli/Cargo.toml")).unwrap();
    let key = format!("RW{}", "A".repeat(54));
    let forms = [
        ("a quoted, spaced header", format!("{stock}\n[ package.metadata.binstall . \"signing\" ]\npubkey = \"RWold\"\n")),
        ("a dotted key", format!("{stock}\n[package.metadata.binstall.overrides]\nx = 1\n[package.metadata]\nbinstall.signing.pubkey = \"RWold\"\n")),
        ("an inline table", format!("{stock}\n[package.metadata.binstall.overrides.x86_64-unknown-linux-gnu]\nsigning = {{ algorithm = \"minisign\", pubkey = \"RWold\" }}\n")),
        (
            "binstall as an inline table",
            stock.replace("[package.metadata.binstall]", "[package.metadata.binstall-was]")
                + "\n[package.metadata]\nbinstall = { pkg-fmt = \"tgz\" }\n",
        ),
    ];
    for (what, before) in forms {
        std::fs::write(&manifest, &before).unwrap();
        let o = Command::new("bash")
            .arg(root.join("scripts/set-binstall-key.sh"))
            .arg(&key)
            .arg(&manifest)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{what}: {}", common::output_text(&o));
        assert!(text(&o.stderr).starts_with("error: "), "{what}: {}", text(&o.stderr));
        assert_eq!(
            std::fs::read_to_string(&manifest).unwrap(),
            before,
            "{what}: the manifest was changed"
        );
    }
}

/// scripts/publish.sh never prints a registry index URL with its password
/// (#54 item 6): not when the index cannot be read, not when it is not a
/// sparse one.
#[test]
fn publish_never_prints_an_index_password() {
    let root = Path::new(env!("GATE_REPO_ROOT"));
    for index in [
        "sparse+http://releaser:s3cretpw@127.0.0.1:9/index/",
        "https://releaser:s3cretpw@127.0.0.1:9/index?token=s3cretpw",
    ] {
        let o = Command::new("bash")
            .arg(root.join("scripts/publish.sh"))
            .args(["--registry", "mine", "--no-verify", "gate-spec"])
            .current_dir(root)
            .env("CARGO_REGISTRIES_MINE_INDEX", index)
            .output()
            .unwrap();
        let all = common::output_text(&o);
        assert_eq!(o.status.code(), Some(1), "{index}: {all}");
        assert!(!all.contains("s3cretpw"), "{index}: the password shows:\n{all}");
        assert!(
            all.contains("releaser") || all.contains("***@127.0.0.1:9"),
            "{index}: {all}"
        );
    }
}

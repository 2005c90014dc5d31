//! `gate init`: a starter budgets.yaml (commented, every key, a small MLP so
//! the first check takes seconds on a CPU) and the two GitHub Actions
//! workflows that run the gate through the reusable workflow and post the
//! fork-safe comment. Refuses to overwrite anything without `--force`.

use std::path::{Path, PathBuf};

use clap::Args;

use super::CliError;
use crate::exit::Exit;

pub const BUDGETS: &str = include_str!("templates/budgets.yaml");
const WORKFLOW: &str = include_str!("templates/gate.yml");
const COMMENT_WORKFLOW: &str = include_str!("templates/gate-comment.yml");

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The repository to set up.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// Overwrite files that exist.
    #[arg(long)]
    pub force: bool,
    /// Write budgets.yaml only, no workflows.
    #[arg(long)]
    pub no_workflows: bool,
    /// The repository gate's workflow and action come from (OWNER/NAME).
    #[arg(long, default_value = env!("GATE_REPOSITORY"), value_name = "OWNER/NAME")]
    pub gate_repo: String,
    /// The release (tag or commit) of gate the workflows use.
    #[arg(long, default_value = concat!("v", env!("CARGO_PKG_VERSION")), value_name = "REF")]
    pub gate_ref: String,
    /// Your default branch (its pushes store the baselines).
    #[arg(long, default_value = "main")]
    pub branch: String,
    /// Gate your own crate's models: write `src/bin/gate-harness.rs`
    /// (`gate::main!(...)`), add gate to its Cargo.toml, and name the harness
    /// in budgets.yaml.
    #[arg(long)]
    pub harness: bool,
    /// The crate that holds the models (default: `--dir`); a workspace member's folder.
    #[arg(long, value_name = "DIR", requires = "harness")]
    pub crate_dir: Option<PathBuf>,
}

/// The harness file `gate init --harness` writes.
const HARNESS: &str = "//! This crate's own `gate`: the built-in workloads plus the ones named
//! below (each a type that implements `gate::Workload`; see docs/sdk.md).
//! budgets.yaml names this binary under `harness:`, so `gate check` builds
//! and runs it.

gate::main!(/* your workloads, e.g. my_crate::MyForecaster */);
";

/// The `[package] name` of the manifest at `path`.
fn package_name(manifest: &str) -> Option<String> {
    let doc = manifest.parse::<toml_edit::DocumentMut>().ok()?;
    doc.get("package")?.get("name")?.as_str().map(str::to_string)
}

/// Adds what a harness needs to a crate's manifest, keeping every key the
/// crate already has: gate, serde (for the configs) and a `cuda` feature
/// that forwards to gate's. Returns the manifest and what was added.
fn with_harness_deps(manifest: &str, repo: &str, tag: &str) -> Result<(String, Vec<String>), String> {
    use toml_edit::{value, Array, DocumentMut, InlineTable, Item, Table};
    let mut doc = manifest.parse::<DocumentMut>().map_err(|e| e.to_string())?;
    let mut added = Vec::new();
    let deps = doc.entry("dependencies").or_insert(Item::Table(Table::new()));
    let deps = deps.as_table_like_mut().ok_or("`dependencies` is not a table")?;
    if !deps.contains_key("gate") {
        let mut t = InlineTable::new();
        t.insert("git", format!("https://github.com/{repo}").into());
        t.insert("tag", tag.into());
        deps.insert("gate", value(t));
        added.push(format!(
            "gate = {{ git = \"https://github.com/{repo}\", tag = \"{tag}\" }}"
        ));
    }
    if !deps.contains_key("serde") {
        let mut t = InlineTable::new();
        t.insert("version", "1".into());
        let mut f = Array::new();
        f.push("derive");
        t.insert("features", f.into());
        deps.insert("serde", value(t));
        added.push("serde = { version = \"1\", features = [\"derive\"] }".into());
    }
    let features = doc.entry("features").or_insert(Item::Table(Table::new()));
    let features = features.as_table_like_mut().ok_or("`features` is not a table")?;
    if !features.contains_key("cuda") {
        let mut a = Array::new();
        a.push("gate/cuda");
        features.insert("cuda", value(a));
        added.push("[features] cuda = [\"gate/cuda\"]".into());
    }
    Ok((doc.to_string(), added))
}

/// budgets.yaml with `harness:` after its `version:` line.
fn with_harness_line(budgets: &str, package: &str) -> String {
    let line = format!(
        "harness: {{ package: {package}, bin: gate-harness }}   # your crate's own gate (src/bin/gate-harness.rs)\n"
    );
    match budgets
        .find("\nversion:")
        .map(|i| i + 1)
        .or(budgets.starts_with("version:").then_some(0))
    {
        Some(i) => {
            let end = budgets[i..].find('\n').map_or(budgets.len(), |n| i + n + 1);
            format!("{}{line}{}", &budgets[..end], &budgets[end..])
        }
        None => format!("{line}{budgets}"),
    }
}

/// The owner gate's Cargo.toml names until it has a real one (see build.rs).
const PLACEHOLDER_OWNER: &str = "OWNER";

/// `OWNER/...`: the placeholder, not a repository anyone can `uses:`.
fn unknown_owner(repo: &str) -> bool {
    repo.split('/').next() == Some(PLACEHOLDER_OWNER)
}

fn fill(template: &str, args: &InitArgs) -> String {
    template
        .replace("{{REPO}}", &args.gate_repo)
        .replace("{{REF}}", &args.gate_ref)
        .replace("{{BRANCH}}", &args.branch)
}

pub fn run(args: InitArgs) -> Result<Exit, CliError> {
    check_names(&args)?;
    let mut files: Vec<(PathBuf, String)> = vec![(out_path(&args, super::DEFAULT_SPEC), BUDGETS.to_string())];
    let mut manifest_edit = None;
    if args.harness {
        let (harness_file, edit) = harness(&args, &mut files[0].1)?;
        files.push(harness_file);
        manifest_edit = Some(edit);
    }
    if !args.no_workflows {
        let wf = out_path(&args, ".github/workflows");
        files.push((wf.join("gate.yml"), fill(WORKFLOW, &args)));
        files.push((wf.join("gate-comment.yml"), fill(COMMENT_WORKFLOW, &args)));
    }
    refuse_placeholder_owner(&args, manifest_edit.as_ref())?;
    write_files(&files, args.force)?;
    if let Some(edit) = manifest_edit {
        // Only keys the crate did not have are added; nothing is overwritten.
        if !edit.added.is_empty() {
            std::fs::write(&edit.manifest, edit.edited).map_err(|e| CliError::Usage {
                message: format!("cannot write {}: {e}", edit.manifest.display()),
                hint: String::new(),
            })?;
            println!("added to {}: {}", edit.manifest.display(), edit.added.join("; "));
        }
        eprintln!(
            "harness: name your workloads in the `gate::main!(...)` line of src/bin/gate-harness.rs (docs/sdk.md)"
        );
    }
    print_next_steps(&args);
    Ok(Exit::Pass)
}

/// `--gate-repo`, `--gate-ref` and `--branch` go into YAML and TOML as they are: plain names only.
fn check_names(args: &InitArgs) -> Result<(), CliError> {
    let safe = |s: &str| {
        !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c)) && !s.contains("..")
    };
    if !safe(&args.gate_repo) || !args.gate_repo.contains('/') || !safe(&args.gate_ref) || !safe(&args.branch) {
        return Err(CliError::Usage {
            message: "--gate-repo, --gate-ref and --branch take plain names (letters, digits, - _ . /)".into(),
            hint: "e.g. `--gate-repo acme/gate --gate-ref v0.2.0 --branch main`".into(),
        });
    }
    Ok(())
}

/// Where file `p` goes: `--dir .` (the default) prints plain relative paths.
fn out_path(args: &InitArgs, p: &str) -> PathBuf {
    if args.dir == Path::new(".") {
        PathBuf::from(p)
    } else {
        args.dir.join(p)
    }
}

/// The crate's Cargo.toml with the harness's dependencies added, and the keys added.
struct ManifestEdit {
    manifest: PathBuf,
    edited: String,
    added: Vec<String>,
}

/// `--harness`: names the harness in `budgets`, and returns the harness's
/// source file and the edit of the crate's Cargo.toml (nothing written yet).
fn harness(args: &InitArgs, budgets: &mut String) -> Result<((PathBuf, String), ManifestEdit), CliError> {
    let crate_dir = args.crate_dir.clone().unwrap_or_else(|| args.dir.clone());
    let manifest = crate_dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).map_err(|e| CliError::Usage {
        message: format!("--harness: cannot read {}: {e}", manifest.display()),
        hint: "run it in the crate that holds your models, or pass `--crate-dir path/to/crate`".into(),
    })?;
    let package = package_name(&text).ok_or_else(|| CliError::Usage {
        message: format!("--harness: {} has no `[package] name`", manifest.display()),
        hint: "in a workspace, pass the member that holds your models: `--crate-dir crates/NAME`".into(),
    })?;
    let (edited, added) = with_harness_deps(&text, &args.gate_repo, &args.gate_ref).map_err(|e| CliError::Usage {
        message: format!("--harness: cannot edit {}: {e}", manifest.display()),
        hint: "add the lines by hand (docs/sdk.md, step 1)".into(),
    })?;
    *budgets = with_harness_line(budgets, &package);
    let source = (crate_dir.join("src/bin/gate-harness.rs"), HARNESS.to_string());
    Ok((
        source,
        ManifestEdit {
            manifest,
            edited,
            added,
        },
    ))
}

/// The placeholder owner would make every `uses:` (and the harness's git
/// dependency) name a repository that does not exist: refuse before
/// writing anything, and say what to pass.
fn refuse_placeholder_owner(args: &InitArgs, manifest_edit: Option<&ManifestEdit>) -> Result<(), CliError> {
    let dependency = manifest_edit.is_some_and(|e| e.added.iter().any(|a| a.starts_with("gate =")));
    if !unknown_owner(&args.gate_repo) || (args.no_workflows && !dependency) {
        return Ok(());
    }
    let what = match (!args.no_workflows, dependency) {
        (true, true) => "the workflows' `uses:` lines and the harness's gate dependency",
        (true, false) => "the workflows' `uses:` lines",
        _ => "the harness's gate dependency",
    };
    let alone = if args.harness {
        ""
    } else {
        "; or `--no-workflows` to write budgets.yaml alone"
    };
    Err(CliError::Usage {
        message: format!(
            "gate does not know which GitHub repository it comes from (`{}`, the placeholder of gate's \
             Cargo.toml), so {what} would name a repository that does not exist",
            args.gate_repo
        ),
        hint: format!(
            "pass `--gate-repo OWNER/NAME`, the GitHub repository you take gate from (e.g. `--gate-repo acme/gate`){alone}"
        ),
    })
}

/// Writes `files`, refusing (before writing any) to overwrite one without `--force`.
fn write_files(files: &[(PathBuf, String)], force: bool) -> Result<(), CliError> {
    let existing: Vec<&Path> = files.iter().map(|(p, _)| p.as_path()).filter(|p| p.exists()).collect();
    if !force && !existing.is_empty() {
        let list: Vec<String> = existing.iter().map(|p| p.display().to_string()).collect();
        return Err(CliError::Usage {
            message: format!("not overwriting {}", list.join(", ")),
            hint: "pass `--force` to replace them, or `--dir DIR` to write elsewhere".into(),
        });
    }
    for (path, text) in files {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| CliError::Usage {
                message: format!("cannot create {}: {e}", parent.display()),
                hint: String::new(),
            })?;
        }
        std::fs::write(path, text).map_err(|e| CliError::Usage {
            message: format!("cannot write {}: {e}", path.display()),
            hint: String::new(),
        })?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// What to do next, on stderr.
fn print_next_steps(args: &InitArgs) {
    let budgets = out_path(args, super::DEFAULT_SPEC);
    eprintln!("next:");
    eprintln!("  gate validate --budgets {}     # check the spec", budgets.display());
    eprintln!(
        "  gate check --budgets {}        # measure it (seconds on a CPU)",
        budgets.display()
    );
    if !args.no_workflows {
        eprintln!(
            "  commit budgets.yaml and .github/workflows/gate*.yml; pull requests then get the gate and its comment"
        );
        // GitHub runs `workflow_run` workflows only from the default branch,
        // so the PR that adds them is measured but never commented on.
        eprintln!(
            "  note: the pull request that adds these workflows gets no comment (GitHub runs the `workflow_run` \
             comment workflow only from the default branch); its results are in the run's job summary and \
             artifact, and comments start once it is merged"
        );
    }
}

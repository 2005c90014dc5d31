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
}

fn fill(template: &str, args: &InitArgs) -> String {
    template
        .replace("{{REPO}}", &args.gate_repo)
        .replace("{{REF}}", &args.gate_ref)
        .replace("{{BRANCH}}", &args.branch)
}

pub fn run(args: InitArgs) -> Result<Exit, CliError> {
    let safe = |s: &str| {
        !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c)) && !s.contains("..")
    };
    if !safe(&args.gate_repo) || !args.gate_repo.contains('/') || !safe(&args.gate_ref) || !safe(&args.branch) {
        return Err(CliError::Usage {
            message: "--gate-repo, --gate-ref and --branch take plain names (letters, digits, - _ . /)".into(),
            hint: "e.g. `--gate-repo acme/gate --gate-ref v0.2.0 --branch main`".into(),
        });
    }
    // `--dir .` (the default) prints plain relative paths.
    let base = |p: &str| {
        if args.dir == Path::new(".") {
            PathBuf::from(p)
        } else {
            args.dir.join(p)
        }
    };
    let mut files: Vec<(PathBuf, String)> = vec![(base("budgets.yaml"), BUDGETS.to_string())];
    if !args.no_workflows {
        let wf = base(".github/workflows");
        files.push((wf.join("gate.yml"), fill(WORKFLOW, &args)));
        files.push((wf.join("gate-comment.yml"), fill(COMMENT_WORKFLOW, &args)));
    }
    let existing: Vec<&Path> = files.iter().map(|(p, _)| p.as_path()).filter(|p| p.exists()).collect();
    if !args.force && !existing.is_empty() {
        let list: Vec<String> = existing.iter().map(|p| p.display().to_string()).collect();
        return Err(CliError::Usage {
            message: format!("not overwriting {}", list.join(", ")),
            hint: "pass `--force` to replace them, or `--dir DIR` to write elsewhere".into(),
        });
    }
    for (path, text) in &files {
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
    if args.gate_repo.starts_with("OWNER/") {
        eprintln!(
            "warning: this gate was built outside GitHub Actions and does not know its repository: \
             the workflows say `OWNER/gate`"
        );
        eprintln!("hint: run again with `--force --gate-repo OWNER/NAME`, or edit the `uses:` lines");
    }
    let budgets = base("budgets.yaml");
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
    }
    Ok(Exit::Pass)
}

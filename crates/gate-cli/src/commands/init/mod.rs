//! `gate init`: a starter budgets.yaml (commented, every key, a small MLP so
//! the first check takes seconds on a CPU) and the two GitHub Actions
//! workflows that run the gate through the reusable workflow and post the
//! fork-safe comment. Refuses to overwrite anything without `--force`.

use std::path::{Path, PathBuf};

use clap::Args;

use crate::errors::CliError;
use gate_runner::exit::Exit;
use gate_spec::hint::Problem;
use harness::{harness, ManifestEdit, SDK_PACKAGE};

mod harness;

pub(super) const BUDGETS: &str = include_str!("../../templates/budgets.yaml");
const WORKFLOW: &str = include_str!("../../templates/gate.yml");
const COMMENT_WORKFLOW: &str = include_str!("../../templates/gate-comment.yml");

#[derive(Debug, Args)]
pub(crate) struct InitArgs {
    /// The repository to set up.
    #[arg(long, default_value = ".")]
    pub dir: PathBuf,
    /// Overwrite files that exist.
    #[arg(long)]
    pub force: bool,
    /// Write budgets.yaml only, no workflows.
    #[arg(long)]
    pub no_workflows: bool,
    /// Where gate comes from: its GitHub repository (OWNER/NAME, or its
    /// https://github.com/ URL) for the workflows and the harness's
    /// dependency; or, with `--harness --no-workflows`, another git URL or a
    /// local checkout's path (a path dependency), until gate is released.
    #[arg(long, default_value = env!("GATE_REPOSITORY"), value_name = "OWNER/NAME|URL|PATH")]
    pub gate_repo: String,
    /// The release (tag or commit) of gate the workflows use.
    #[arg(long, default_value = concat!("v", env!("CARGO_PKG_VERSION")), value_name = "REF")]
    pub gate_ref: String,
    /// The full commit SHA that `--gate-ref` names: the workflows then use
    /// gate by that SHA, with the tag in a comment, as organisations that
    /// require SHA-pinned actions demand (a tag can be moved; a SHA cannot).
    #[arg(long, value_name = "SHA")]
    pub gate_sha: Option<String>,
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

impl GateSource {
    /// A dependency on one of gate's packages from here: git and `tag`, or
    /// the checkout's path joined with `folder` (the package's folder in
    /// gate's repository, `crates/gate-sdk` for the SDK).
    fn dependency(&self, tag: &str, folder: &str) -> toml_edit::InlineTable {
        let mut t = toml_edit::InlineTable::new();
        match self {
            GateSource::GitHub(repo) => {
                t.insert("git", format!("https://github.com/{repo}").into());
                t.insert("tag", tag.into());
            }
            GateSource::Git(url) => {
                t.insert("git", url.as_str().into());
                t.insert("tag", tag.into());
            }
            GateSource::Path(p) => {
                let path = p.join(folder);
                t.insert("path", path.to_string_lossy().as_ref().into());
            }
        }
        t
    }
}

/// Where the harness's gate dependency comes from (`--gate-repo`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum GateSource {
    /// A GitHub repository, `OWNER/NAME`: the workflows' `uses:` and a git dependency.
    GitHub(String),
    /// Another git URL: a git dependency only.
    Git(String),
    /// A local checkout: a path dependency only.
    Path(PathBuf),
}

impl GateSource {
    fn parse(s: &str) -> GateSource {
        let github = s
            .strip_prefix("https://github.com/")
            .map(|r| r.trim_end_matches('/').trim_end_matches(".git"));
        if let Some(repo) = github {
            return GateSource::GitHub(repo.to_string());
        }
        if s.contains("://") || s.starts_with("git@") {
            return GateSource::Git(s.to_string());
        }
        let path = Path::new(s);
        if path.is_absolute() || s.starts_with('.') || path.join("Cargo.toml").is_file() {
            return GateSource::Path(path.to_path_buf());
        }
        GateSource::GitHub(s.to_string())
    }

    /// The `OWNER/NAME` the workflows can `uses:`, if this is one.
    fn github(&self) -> Option<&str> {
        match self {
            GateSource::GitHub(r) => Some(r),
            _ => None,
        }
    }
}

/// `to` relative to `from` (both absolute), for a path dependency a team can commit.
fn relative(from: &Path, to: &Path) -> PathBuf {
    let (f, t): (Vec<_>, Vec<_>) = (from.components().collect(), to.components().collect());
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..f.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c);
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// The `[package] name` of the manifest `text` (read from `path`): a TOML
/// syntax error is said at its line and column, and a name cargo would not
/// take (it goes into budgets.yaml) at the name's.
fn package_name(path: &Path, text: &str) -> Result<String, CliError> {
    let at = |span: Option<std::ops::Range<usize>>| {
        let start = span.map_or(0, |s| s.start).min(text.len());
        let before = &text[..start];
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        format!("{}:{line}:{col}", path.display())
    };
    // Read as parsed (`ImDocument`), which keeps each item's position.
    let doc = toml_edit::ImDocument::parse(text).map_err(|e| {
        // toml_edit's message repeats the position and quotes the line: its first line of prose is kept.
        let what = e.message().trim().lines().next().unwrap_or("invalid TOML").to_string();
        CliError::Usage(
            Problem::new(format!("--harness: {}: not valid TOML: {what}", at(e.span()))).with_hint(
                "fix the manifest (`cargo metadata` shows the same error), then run `gate init --harness` again",
            ),
        )
    })?;
    let name = doc.get("package").and_then(|p| p.get("name"));
    let Some(name) = name else {
        return Err(CliError::Usage(
            Problem::new(format!("--harness: {} has no `[package] name`", path.display()))
                .with_hint("in a workspace, pass the member that holds your models: `--crate-dir crates/NAME`"),
        ));
    };
    let span = name.span();
    match name.as_str() {
        Some(n) if gate_spec::budget::is_cargo_name(n) => Ok(n.to_string()),
        other => Err(CliError::Usage(
            Problem::new(format!(
                "--harness: {}: `[package] name` is {}, which is not a cargo package name",
                at(span),
                other.map_or_else(|| "not a string".to_string(), |n| format!("{n:?}"))
            ))
            .with_hint("a package name is letters, digits, `-` and `_`, not starting with `-` (cargo refuses others)"),
        )),
    }
}

/// budgets.yaml with `harness:` after its `version:` line. The name is
/// written as a double-quoted YAML string (a JSON string is one): a cargo
/// name such as `true`, `null`, `no` or `1e3` is not a string in YAML plain.
fn with_harness_line(budgets: &str, package: &str) -> String {
    let quoted = serde_json::to_string(package).unwrap_or_else(|_| format!("{package:?}"));
    let line = format!(
        "harness: {{ package: {quoted}, bin: gate-harness }}   # your crate's harness (src/bin/gate-harness.rs)\n"
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

/// What follows `@` in the workflows' `uses:` lines: the SHA with the tag
/// in a comment when `--gate-sha` names one, else the tag.
fn pin(args: &InitArgs) -> String {
    match &args.gate_sha {
        Some(sha) => format!("{sha}  # {}", args.gate_ref),
        None => args.gate_ref.clone(),
    }
}

fn fill(template: &str, args: &InitArgs, repo: &str) -> String {
    template
        .replace("{{REPO}}", repo)
        .replace("{{PIN}}", &pin(args))
        .replace("{{REF}}", &args.gate_ref)
        .replace("{{BRANCH}}", &args.branch)
}

/// A full commit SHA: 40 lowercase hex digits (GitHub's SHA-pinning policy
/// takes nothing shorter).
fn full_sha(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

pub(super) fn run(args: InitArgs, app: &crate::app::App<'_>) -> Result<Exit, CliError> {
    let source = GateSource::parse(&args.gate_repo);
    check_names(&args, &source)?;
    // The starter spec without `--harness` measures the built-in `mlp`,
    // which this gate would then refuse to run.
    if !args.harness && app.builtins.is_none() {
        return Err(CliError::Usage(
            Problem::new(
                "this gate has no built-in models (built without its `builtins` feature), so the starter spec's \
                 `mlp` could not run; nothing was written",
            )
            .with_hint("pass `--harness` to gate your own crate's models, or use a gate with the built-ins"),
        ));
    }
    let mut files: Vec<(PathBuf, String)> = vec![(out_path(&args, crate::app::DEFAULT_SPEC), BUDGETS.to_string())];
    let mut manifest_edit = None;
    if args.harness {
        let (harness_file, edit) = harness(&args, &source, app.sdk_manifest, &mut files[0].1)?;
        files.push(harness_file);
        manifest_edit = Some(edit);
    }
    if !args.no_workflows {
        let repo = source.github().ok_or_else(|| {
            CliError::Usage(
                Problem::new(format!(
                "the workflows need gate's GitHub repository (`uses: OWNER/NAME/...`), and `--gate-repo {}` is not one",
                args.gate_repo
            ))
                .with_hint(
                    "pass `--no-workflows` to set up the harness from that source alone, or `--gate-repo OWNER/NAME`",
                ),
            )
        })?;
        let wf = out_path(&args, ".github/workflows");
        files.push((wf.join("gate.yml"), fill(WORKFLOW, &args, repo)));
        files.push((wf.join("gate-comment.yml"), fill(COMMENT_WORKFLOW, &args, repo)));
    }
    refuse_placeholder_owner(&args, &source, manifest_edit.as_ref())?;
    write_files(&files, args.force)?;
    if let Some(edit) = manifest_edit {
        // Only keys the crate did not have are added; nothing is overwritten.
        if !edit.added.is_empty() {
            std::fs::write(&edit.manifest, edit.edited)
                .map_err(|e| CliError::Usage(Problem::new(format!("cannot write {}: {e}", edit.manifest.display()))))?;
            println!("added to {}: {}", edit.manifest.display(), edit.added.join("; "));
        }
        eprintln!(
            "harness: name your workloads in the `gate::main!(...)` line of src/bin/gate-harness.rs (docs/sdk.md)"
        );
    }
    print_next_steps(&args);
    Ok(Exit::Pass)
}

/// A GitHub `--gate-repo`, `--gate-ref` and `--branch` go into YAML as they
/// are: plain names only. A URL or a path goes only into Cargo.toml, which
/// toml_edit quotes; it may not hold a line break.
fn check_names(args: &InitArgs, source: &GateSource) -> Result<(), CliError> {
    if let Some(shown) = credentials_in(&args.gate_repo) {
        return Err(CliError::Usage(
            Problem::new(format!(
                "--gate-repo {shown}: the URL holds credentials, which gate would write into Cargo.toml \
                 (a file meant to be committed); nothing was written"
            ))
            .with_hint(
                "pass the URL without them (`https://host/owner/gate`); cargo fetches a private repository \
                 with git's own credentials (`CARGO_NET_GIT_FETCH_WITH_CLI=true` and a credential helper)",
            ),
        ));
    }
    let safe = |s: &str| {
        !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c)) && !s.contains("..")
    };
    let repo_ok = match source {
        GateSource::GitHub(r) => safe(r) && r.contains('/'),
        GateSource::Git(u) => !u.chars().any(char::is_control),
        GateSource::Path(p) => !p.to_string_lossy().chars().any(char::is_control),
    };
    if !repo_ok || !safe(&args.gate_ref) || !safe(&args.branch) {
        return Err(CliError::Usage(
            Problem::new(
                "--gate-repo takes OWNER/NAME, a URL or a path; --gate-ref and --branch take plain names \
                      (letters, digits, - _ . /)",
            )
            .with_hint(
                "e.g. `--gate-repo acme/gate --gate-ref v0.2.0 --branch main`, or `--gate-repo ../gate --no-workflows`",
            ),
        ));
    }
    if let Some(sha) = args.gate_sha.as_deref().filter(|s| !full_sha(s)) {
        return Err(CliError::Usage(
            Problem::new(format!(
                "--gate-sha {sha}: not a full commit SHA (40 hex digits, lowercase)"
            ))
            .with_hint(format!(
                "the commit of the tag: `git ls-remote https://github.com/OWNER/gate 'refs/tags/{}*'` \
                 (an annotated tag's commit is the line ending in `^{{}}`)",
                args.gate_ref
            )),
        ));
    }
    if let GateSource::Path(p) = source {
        if !p.join("Cargo.toml").is_file() {
            return Err(CliError::Usage(
                Problem::new(format!(
                    "--gate-repo {}: no gate checkout there (no Cargo.toml)",
                    p.display()
                ))
                .with_hint("pass the folder of a gate checkout (the one with gate's Cargo.toml)"),
            ));
        }
    }
    Ok(())
}

/// `url` with its credentials shown as `***`, if it holds any: a user or
/// password before `@` in an `http(s)://` URL (a token is often the user),
/// a password in any other, or a query (`?access_token=...`) in an
/// `http(s)://` one. An SSH user alone (`git@host:...`, `ssh://git@host/...`)
/// is a login name, not a secret.
fn credentials_in(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let web = matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https");
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let (userinfo, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, authority),
    };
    let secret_user = userinfo.is_some_and(|u| web || u.contains(':'));
    let query = web && path.contains('?');
    if !secret_user && !query {
        return None;
    }
    let path = match path.split_once('?') {
        Some((p, _)) if query => format!("{p}?***"),
        _ => path.to_string(),
    };
    let user = match userinfo {
        Some(_) if secret_user => "***@".to_string(),
        Some(u) => format!("{u}@"),
        None => String::new(),
    };
    Some(format!("{scheme}://{user}{host}{path}"))
}

/// Where file `p` goes: `--dir .` (the default) prints plain relative paths.
fn out_path(args: &InitArgs, p: &str) -> PathBuf {
    if args.dir == Path::new(".") {
        PathBuf::from(p)
    } else {
        args.dir.join(p)
    }
}

/// The placeholder owner would make every `uses:` (and the harness's git
/// dependency) name a repository that does not exist: refuse before
/// writing anything, and say what to pass.
fn refuse_placeholder_owner(
    args: &InitArgs,
    source: &GateSource,
    manifest_edit: Option<&ManifestEdit>,
) -> Result<(), CliError> {
    let dependency = manifest_edit.is_some_and(|e| e.added.iter().any(|a| a.starts_with(&format!("{SDK_PACKAGE} ="))));
    let placeholder = source.github().is_some_and(unknown_owner);
    if !placeholder || (args.no_workflows && !dependency) {
        return Ok(());
    }
    let what = match (!args.no_workflows, dependency) {
        (true, true) => "the workflows' `uses:` lines and the harness's gate dependency",
        (true, false) => "the workflows' `uses:` lines",
        _ => "the harness's gate dependency",
    };
    let alone = if args.harness {
        ", or with `--no-workflows` a gate checkout's path or a git URL"
    } else {
        "; or `--no-workflows` to write budgets.yaml alone"
    };
    Err(CliError::Usage(Problem::new(format!(
            "gate does not know which GitHub repository it comes from (`{}`, the placeholder of gate's \
             Cargo.toml), so {what} would name a repository that does not exist",
            args.gate_repo
        )).with_hint(format!(
            "pass `--gate-repo OWNER/NAME`, the GitHub repository you take gate from (e.g. `--gate-repo acme/gate`){alone}"
        ))))
}

/// Writes `files`, refusing (before writing any) to overwrite one without `--force`.
fn write_files(files: &[(PathBuf, String)], force: bool) -> Result<(), CliError> {
    let existing: Vec<&Path> = files.iter().map(|(p, _)| p.as_path()).filter(|p| p.exists()).collect();
    if !force && !existing.is_empty() {
        let list: Vec<String> = existing.iter().map(|p| p.display().to_string()).collect();
        return Err(CliError::Usage(
            Problem::new(format!("not overwriting {}", list.join(", ")))
                .with_hint("pass `--force` to replace them, or `--dir DIR` to write elsewhere"),
        ));
    }
    for (path, text) in files {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| CliError::Usage(Problem::new(format!("cannot create {}: {e}", parent.display()))))?;
        }
        std::fs::write(path, text)
            .map_err(|e| CliError::Usage(Problem::new(format!("cannot write {}: {e}", path.display()))))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// What to do next, on stderr.
fn print_next_steps(args: &InitArgs) {
    let budgets = out_path(args, crate::app::DEFAULT_SPEC);
    eprintln!("next:");
    if args.harness {
        // The harness's first build compiles its framework (minutes); later ones, seconds.
        eprintln!(
            "  gate validate --build --budgets {}   # build the harness (minutes the first time) and check the spec",
            budgets.display()
        );
        eprintln!("  gate check --budgets {}        # measure it", budgets.display());
    } else {
        eprintln!("  gate validate --budgets {}     # check the spec", budgets.display());
        eprintln!(
            "  gate check --budgets {}        # measure it (seconds on a CPU)",
            budgets.display()
        );
    }
    if !args.no_workflows {
        eprintln!(
            "  commit budgets.yaml and .github/workflows/gate*.yml; pull requests then get the gate and its comment"
        );
        // GitHub runs `workflow_run` workflows only from the default branch,
        // so the PR that adds them is measured but never commented on.
        if args.gate_sha.is_none() {
            eprintln!(
                "  pin: the workflows use gate by its tag `{}`; where actions must be pinned by commit SHA, \
                 run `gate init --force --gate-sha SHA` with the tag's commit (docs/github.md#pinning-by-commit-sha)",
                args.gate_ref
            );
        }
        eprintln!(
            "  note: the pull request that adds these workflows gets no comment (GitHub runs the `workflow_run` \
             comment workflow only from the default branch); its results are in the run's job summary and \
             artifact, and comments start once it is merged"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_a_url_are_found_and_hidden() {
        let found = |u: &str| credentials_in(u);
        assert_eq!(
            found("https://user:pass@host/o/gate"),
            Some("https://***@host/o/gate".into())
        );
        assert_eq!(
            found("https://ghp_tok@git.example.com/o/gate"),
            Some("https://***@git.example.com/o/gate".into())
        );
        assert_eq!(found("ssh://git:pw@host/o/gate"), Some("ssh://***@host/o/gate".into()));
        assert_eq!(
            found("https://host/o/gate?access_token=x"),
            Some("https://host/o/gate?***".into())
        );
        assert_eq!(found("HTTPS://u@host/g"), Some("HTTPS://***@host/g".into()));
        // A login name for SSH is no secret; nor is a plain URL.
        assert_eq!(found("ssh://git@host/o/gate"), None);
        assert_eq!(found("git@github.com:o/gate.git"), None);
        assert_eq!(found("https://host/o/gate"), None);
        assert_eq!(found("acme/gate"), None);
    }

    #[test]
    fn the_package_name_is_quoted_in_yaml() {
        let b = with_harness_line("version: 1\n", "null");
        assert!(b.contains(r#"harness: { package: "null", bin: gate-harness }"#), "{b}");
    }
}

//! The README is a newcomer's five minutes and the manual under docs/ is
//! the rest (issue #51 item 5): the README fits on a screen, every page of
//! the manual is reachable from it, and what the README and the manual
//! show (the budgets.yaml reference, the workflow snippets, the files a
//! reader copies) is what gate reads and writes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("GATE_REPO_ROOT"))
}

#[test]
fn the_manuals_budgets_yaml_reference_validates() {
    let reference = include_str!("../../docs/budgets.md");
    let start = reference.find("```yaml\n").expect("a yaml block") + "```yaml\n".len();
    let end = reference[start..].find("```").expect("the block ends") + start;
    let spec = gate_spec::budget::parse(Path::new("docs/budgets.md"), &reference[start..end])
        .unwrap_or_else(|d| panic!("the manual's example spec is invalid:\n{d}"));
    assert!(spec.component("tft").is_some());
}

#[test]
fn the_readme_is_at_most_250_lines() {
    let lines = include_str!("../../README.md").lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines: the rest belongs in the manual (docs/)"
    );
}

/// The two set-up commands, as the README has always given them, with
/// their measured cost beside them.
#[test]
fn the_readme_keeps_the_two_set_up_commands_and_their_measured_time() {
    let readme = include_str!("../../README.md");
    let at = readme.find("## Set-up: two commands\n").expect("the set-up section");
    let section = &readme[at..];
    assert!(section.contains(
        "cargo run --release -- check      # the gate on this repository's budgets.yaml, on the CPU\n\
         cargo test                        # the test suite\n"
    ));
    // The figures change as they are measured again; the sentences stay.
    assert!(
        section.contains(" s, the median of ") && section.contains(" runs "),
        "the run's measured time"
    );
    assert!(section.contains(" s cold on 2 cores"), "the test suite's measured time");
}

/// Relative Markdown links of `text` (a file in `dir`), as paths from the root.
fn relative_links(dir: &Path, text: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for piece in text.split("](").skip(1) {
        let target = piece.split(')').next().unwrap_or("");
        let target = target.split('#').next().unwrap_or("");
        if target.is_empty() || target.contains("://") || target.contains(' ') {
            continue;
        }
        let mut path = dir.to_path_buf();
        for part in target.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    path.pop();
                }
                p => path.push(p),
            }
        }
        out.push(path);
    }
    out
}

/// Every page of the manual is reachable from the README by links a
/// reader follows (the README, then the index, then the pages).
#[test]
fn every_page_of_the_manual_is_reachable_from_the_readme() {
    let mut seen: BTreeSet<PathBuf> = BTreeSet::new();
    let mut queue = vec![PathBuf::from("README.md")];
    while let Some(page) = queue.pop() {
        if !seen.insert(page.clone()) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(root().join(&page)) else {
            continue;
        };
        let dir = page.parent().unwrap_or(Path::new("")).to_path_buf();
        for link in relative_links(&dir, &text) {
            if link.extension().is_some_and(|e| e == "md")
                && (link.starts_with("docs") || link == Path::new("README.md"))
            {
                queue.push(link);
            }
        }
    }
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .flatten()
        .map(|e| PathBuf::from("docs").join(e.file_name()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    let unreachable: Vec<_> = pages.iter().filter(|p| !seen.contains(*p)).collect();
    assert!(unreachable.is_empty(), "not reachable from README.md: {unreachable:?}");
    // The index names every page itself, so a reader walks it in one place.
    let index = std::fs::read_to_string(root().join("docs/README.md")).unwrap();
    let named: BTreeSet<PathBuf> = relative_links(Path::new("docs"), &index).into_iter().collect();
    for page in &pages {
        if page != Path::new("docs/README.md") {
            assert!(
                named.contains(page),
                "docs/README.md (the index) does not name {}",
                page.display()
            );
        }
    }
}

/// The README's fenced blocks in `lang`, each with its first line number.
fn blocks<'a>(text: &'a str, langs: &[&str]) -> Vec<(usize, &'a str)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, usize)> = None;
    let mut offset = 0;
    for (n, line) in text.split_inclusive('\n').enumerate() {
        let t = line.trim();
        match open {
            None if t.starts_with("```") && langs.contains(&t.trim_start_matches('`')) => {
                open = Some((n + 2, offset + line.len()));
            }
            Some((first, start)) if t == "```" => {
                out.push((first, &text[start..offset]));
                open = None;
            }
            _ => {}
        }
        offset += line.len();
    }
    out
}

/// What would build the reader's own crate instead of gate, in a workflow
/// of theirs (issue #14 item 1).
const BUILDS_THE_CHECKOUT: [&str; 2] = ["cargo build", "target/release/gate"];

#[test]
fn the_readmes_workflow_snippets_use_the_action_never_a_build_of_the_checkout() {
    let readme = include_str!("../../README.md");
    let manual = include_str!("../../docs/github.md");
    let snippets = [blocks(readme, &["yaml", "yml"]), blocks(manual, &["yaml", "yml"])].concat();
    let workflows: Vec<&(usize, &str)> = snippets
        .iter()
        .filter(|(_, b)| {
            b.lines().map(|l| l.trim_start().trim_start_matches("- ")).any(|l| {
                l.starts_with("uses:") || l.starts_with("run:") || l.starts_with("jobs:") || l.starts_with("steps:")
            }) && !b.contains("components:")
        })
        .collect();
    assert!(
        workflows.len() >= 2,
        "the README's and the manual's workflow snippets were not found"
    );
    for (line, block) in workflows {
        for bad in BUILDS_THE_CHECKOUT {
            assert!(
                !block.contains(bad),
                "README.md or docs/github.md:{line}: a workflow snippet runs `{bad}`:\n{block}"
            );
        }
        assert!(
            block.contains("uses: OWNER/gate"),
            "README.md or docs/github.md:{line}: a workflow snippet that does not take gate from the action or the reusable workflow:\n{block}"
        );
    }
    for (name, template) in [
        ("gate.yml", include_str!("../../crates/gate-cli/src/templates/gate.yml")),
        (
            "gate-comment.yml",
            include_str!("../../crates/gate-cli/src/templates/gate-comment.yml"),
        ),
    ] {
        for bad in BUILDS_THE_CHECKOUT {
            assert!(
                !template.contains(bad),
                "crates/gate-cli/src/templates/{name} runs `{bad}`"
            );
        }
    }
}

/// The files the manual tells a reader to put in their repository are the
/// ones `gate init` writes; gate's own workflows are listed apart.
#[test]
fn the_manual_hands_readers_only_what_gate_init_writes() {
    let readme = include_str!("../../docs/github.md");
    let section = |title: &str| {
        let start = readme
            .find(title)
            .unwrap_or_else(|| panic!("docs/github.md has `{title}`"));
        let rest = &readme[start + title.len()..];
        &rest[..rest.find("\n## ").unwrap_or(rest.len())]
    };
    let yours = section("## What goes in your repository\n");
    let named: Vec<&str> = yours
        .split('`')
        .filter(|w| w.starts_with(".github/workflows/") && w.ends_with(".yml"))
        .collect();
    assert_eq!(
        named,
        [".github/workflows/gate.yml", ".github/workflows/gate-comment.yml"]
    );
    for file in named {
        let template = std::path::Path::new(env!("GATE_REPO_ROOT"))
            .join("crates/gate-cli/src/templates")
            .join(file.trim_start_matches(".github/workflows/"));
        assert!(template.exists(), "{file} is not a template of `gate init`");
    }
    // Every workflow of this repository that builds gate from its checkout
    // is named in the "own" section and says so in its name.
    let own = section("## gate's own workflows (not to copy)\n");
    let dir = std::path::Path::new(env!("GATE_REPO_ROOT")).join(".github/workflows");
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap();
        let file = e.file_name().to_string_lossy().into_owned();
        assert!(
            own.contains(&format!("`{file}`")),
            "docs/github.md: {file} is missing from gate's own workflows"
        );
        if BUILDS_THE_CHECKOUT.iter().any(|b| text.contains(b)) {
            let name = text.lines().find_map(|l| l.strip_prefix("name: ")).unwrap_or("");
            assert!(
                name.starts_with("gate (own CI, ") || name == "ci",
                "{file}: builds gate from the checkout but is named `{name}`"
            );
        }
    }
}

/// A GitHub App's installation token carries the App's permissions, not
/// the workflow's (#51): the manual's App section lists every one the
/// comment job uses, `Actions: read` (the artifacts) included.
#[test]
fn the_manuals_github_app_section_lists_the_permissions_the_comment_job_uses() {
    let manual = include_str!("../../docs/github.md");
    let at = manual.find("## Commenting as a GitHub App").expect("the App section");
    let section = &manual[at..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    for permission in [
        "**Actions: read**",
        "**Pull requests:",
        "**Contents: read**",
        "**Checks: read and write**",
    ] {
        assert!(
            section.contains(permission),
            "docs/github.md's App section omits {permission}"
        );
    }
}

/// Each command line of the README's `sh` blocks, its comment dropped.
fn readme_commands(readme: &str) -> Vec<String> {
    blocks(readme, &["sh"])
        .into_iter()
        .flat_map(|(_, block)| block.lines())
        .map(|l| l.split("  #").next().unwrap_or(l).trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// A release host on loopback: `GET /OWNER/gate/releases/download/TAG/NAME`
/// answers `dir/NAME`, anything else 404, as github.com's release downloads
/// do once their redirect is followed (`curl -L`). Its base URL.
fn serve_release(dir: PathBuf, tag: String) -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request = String::new();
            if reader.read_line(&mut request).is_err() {
                continue;
            }
            // The headers, up to the blank line.
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let path = request.split(' ').nth(1).unwrap_or("");
            let prefix = format!("/OWNER/gate/releases/download/{tag}/");
            let file = path
                .strip_prefix(&prefix)
                .filter(|name| !name.contains('/') && !name.starts_with('.'))
                .and_then(|name| std::fs::read(dir.join(name)).ok());
            let _ = match file {
                Some(body) => stream
                    .write_all(
                        format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        )
                        .as_bytes(),
                    )
                    .and_then(|_| stream.write_all(&body)),
                None => stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
            };
        }
    });
    base
}

/// Every command the README shows runs in a test (issue #51 item 5): its
/// install from a release runs here, line for line, against the release
/// gate-release.yml's jobs publish in their rehearsal (served on loopback
/// for github.com); binstall's URL names an archive that release holds;
/// the five-minute start runs here in a git repository of its own, down to
/// the push; the two set-up commands are CI's own (.ci/run runs the
/// README's test command; acceptance.rs runs the repository's gate). A
/// command added to the README without a place here fails this test.
#[test]
fn every_command_the_readme_shows_runs_in_a_test() {
    if !crate::common::available(
        "every_command_the_readme_shows_runs_in_a_test",
        ["curl", "sha256sum", "tar", "git"]
            .into_iter()
            .find(|tool| {
                std::process::Command::new("sh")
                    .args(["-c", &format!("command -v {tool}")])
                    .output()
                    .map_or(true, |o| !o.status.success())
            })
            .map(|tool| format!("`{tool}` is not installed")),
    ) {
        return;
    }
    let readme = include_str!("../../README.md");
    let commands = readme_commands(readme);
    let sh = blocks(readme, &["sh"]);
    let block_with = |needle: &str| {
        sh.iter()
            .find(|(_, b)| b.contains(needle))
            .map(|(_, b)| b.to_string())
            .unwrap_or_else(|| panic!("no sh block of the README holds `{needle}`"))
    };
    let install = block_with("curl -fsSLO");
    let start = block_with("gate init");
    let set_up = ["cargo run --release -- check", "cargo test"];
    let binstall = "cargo binstall gate-cli";
    let covered: Vec<String> = readme_commands(&format!("```sh\n{install}```\n```sh\n{start}```\n"))
        .into_iter()
        .chain(set_up.iter().map(|s| s.to_string()))
        .chain([binstall.to_string()])
        .collect();
    let uncovered: Vec<&String> = commands.iter().filter(|c| !covered.contains(c)).collect();
    assert!(uncovered.is_empty(), "README commands no test runs: {uncovered:?}");

    // The release, rehearsed: gate-release.yml's package and release jobs.
    let t = tempfile::tempdir().unwrap();
    let release = std::fs::read_to_string(root().join(".github/workflows/gate-release.yml")).unwrap();
    let doc = yaml_rust2::YamlLoader::load_from_str(&release).unwrap().remove(0);
    crate::workflow_rehearsal::rehearse_release_in(doc, t.path()).unwrap_or_else(|e| panic!("{e}"));
    let dist = crate::workflow_rehearsal::release_workspace(t.path()).join("dist");
    let version = crate::workflow_rehearsal::workspace_version();
    let tag = format!("v{version}");
    let base = serve_release(dist.clone(), tag.clone());

    // The install block, as a reader runs it: the release they chose (the
    // README's `V=` line names one; here, the rehearsed one), github.com
    // on loopback, and `sudo install` into a folder of the test's.
    let home = t.path().join("reader");
    let bin = home.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = install
        .lines()
        .map(|l| match l.trim_start().starts_with("V=") {
            true => format!("V={tag}"),
            false => l
                .replace("https://github.com", &base)
                .replace("sudo install", "install")
                .replace("/usr/local/bin/", &format!("{}/", bin.display())),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let o = std::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .current_dir(&home)
        .output()
        .unwrap();
    assert!(o.status.success(), "{script}\n{}", crate::common::output_text(&o));
    let installed = std::process::Command::new(bin.join("gate"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(
        crate::common::text(&installed.stdout).starts_with(&format!("gate {version}\n")),
        "{}",
        crate::common::output_text(&installed)
    );

    // binstall: gate-cli's metadata resolves to an archive of that release.
    let cli: toml_edit::DocumentMut = std::fs::read_to_string(root().join("crates/gate-cli/Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    let url = cli["package"]["metadata"]["binstall"]["pkg-url"]
        .as_str()
        .expect("gate-cli's binstall pkg-url")
        .replace("{ repo }", "https://github.com/OWNER/gate")
        .replace("{ version }", &version)
        .replace("{ target }", "x86_64-unknown-linux-gnu")
        .replace("{ archive-suffix }", ".tar.gz");
    let archive = url
        .strip_prefix(&format!("https://github.com/OWNER/gate/releases/download/{tag}/"))
        .unwrap_or_else(|| panic!("{url}"));
    assert!(dist.join(archive).is_file(), "{archive} is not in the release");
    assert!(dist.join(format!("{archive}.sig")).is_file(), "{archive}.sig");

    // The five-minute start, in a repository of the reader's with a remote.
    // A build from this checkout names the placeholder `OWNER/gate` as its
    // repository (a release's binary names its own), so `gate init` gets it
    // the way a release build has it.
    let remote = t.path().join("remote.git");
    let repo = t.path().join("team");
    let git = |dir: &Path, args: &[&str]| {
        let o = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "git {args:?}: {}", crate::common::output_text(&o));
    };
    std::fs::create_dir_all(&repo).unwrap();
    git(t.path(), &["init", "-q", "--bare", remote.to_str().unwrap()]);
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.email", "team@example.com"]);
    git(&repo, &["config", "user.name", "team"]);
    git(&repo, &["remote", "add", "origin", remote.to_str().unwrap()]);
    git(&repo, &["commit", "-q", "--allow-empty", "-m", "start"]);
    git(&repo, &["push", "-q", "-u", "origin", "main"]);
    let tools = t.path().join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    let gate = crate::common::gate_exe();
    let wrapper = tools.join("gate");
    crate::common::write_executable(
        &wrapper,
        &format!(
            "#!/bin/sh\nif [ \"$1\" = init ]; then shift; exec '{}' init --gate-repo acme/gate \"$@\"; fi\nexec '{}' \"$@\"\n",
            gate.display(),
            gate.display()
        ),
    );
    let path = format!("{}:{}", tools.display(), std::env::var("PATH").unwrap_or_default());
    let o = std::process::Command::new("bash")
        .args(["-euo", "pipefail", "-c", &start])
        .current_dir(&repo)
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{start}\n{}", crate::common::output_text(&o));
    let pushed = std::process::Command::new("git")
        .args(["ls-tree", "-r", "--name-only", "main"])
        .current_dir(&remote)
        .output()
        .unwrap();
    let files = crate::common::text(&pushed.stdout);
    for f in [
        "budgets.yaml",
        ".github/workflows/gate.yml",
        ".github/workflows/gate-comment.yml",
    ] {
        assert!(files.lines().any(|l| l == f), "{f} pushed: {files}");
    }
}

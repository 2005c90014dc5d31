//! Every link a reader can follow resolves (issue #14 item 11): each
//! relative Markdown link (and `src=`/`href=`) in README.md, CONTRIBUTING.md
//! and docs/*.md; each mention of a document of this repository
//! (`docs/*.md`, README.md, CONTRIBUTING.md) in those, in action.yml, in
//! .github/workflows/*.yml, in `gate init`'s templates and in what `gate
//! init` prints; and each `https://github.com/<gate's repository>/blob|tree/
//! <ref>/PATH` link. The target must exist, and a `#anchor` into a Markdown
//! file must be one of its headings as GitHub names them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("GATE_REPO_ROOT"))
}

/// The files whose links are checked, relative to the root.
fn sources() -> Vec<String> {
    let mut files = vec!["README.md".to_string(), "CONTRIBUTING.md".into(), "action.yml".into()];
    for (dir, ext) in [
        ("docs", "md"),
        (".github/workflows", "yml"),
        ("crates/gate-cli/src/templates", ""),
    ] {
        let mut found: Vec<String> = std::fs::read_dir(root().join(dir))
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| ext.is_empty() || n.ends_with(&format!(".{ext}")))
            .map(|n| format!("{dir}/{n}"))
            .collect();
        found.sort();
        files.extend(found);
    }
    // What `gate init` prints and writes besides the templates.
    files.push("crates/gate-cli/src/commands/init/mod.rs".into());
    files.push("crates/gate-cli/src/commands/init/harness.rs".into());
    files
}

/// `OWNER/NAME` of gate's own repository, from Cargo.toml's `repository`.
fn own_repo() -> String {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let line = manifest
        .lines()
        .find(|l| l.starts_with("repository = \""))
        .expect("Cargo.toml names the repository ([workspace.package])");
    let url = line.split('"').nth(1).expect("a quoted URL");
    url.trim_start_matches("https://github.com/")
        .trim_end_matches('/')
        .to_string()
}

/// Markdown without its fenced code blocks (their lines become empty, so
/// line numbers stay).
fn without_fences(md: &str) -> String {
    let mut fence: Option<&str> = None;
    let mut out = String::new();
    for line in md.lines() {
        let t = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| t.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(f), Some(m)) if f == m => fence = None,
            (None, None) => out.push_str(line),
            _ => {}
        }
        out.push('\n');
    }
    out
}

/// `text` without its inline code spans (a link inside backticks is code).
fn without_code_spans(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find('`') {
        let ticks = rest[start..].chars().take_while(|c| *c == '`').count();
        let fence = "`".repeat(ticks);
        let after = &rest[start + ticks..];
        match after.find(&fence) {
            Some(end) => {
                out.push_str(&rest[..start]);
                // Keep the newlines so line numbers stay.
                out.extend(after[..end].chars().filter(|c| *c == '\n'));
                rest = &after[end + ticks..];
            }
            None => {
                out.push_str(&rest[..start + ticks]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The anchors GitHub gives a Markdown file's headings: the heading's text
/// (a link's text, not its URL) lowercased, with everything but letters,
/// digits, spaces, `-` and `_` dropped and spaces made `-`; a repeated
/// slug gets `-1`, `-2`, ... Also `<a name>`/`id=` anchors.
fn anchors(md: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for line in without_fences(md).lines() {
        let Some(text) = line.strip_prefix('#').map(|t| t.trim_start_matches('#')) else {
            for key in ["name=\"", "id=\""] {
                for (i, _) in line.match_indices(key) {
                    let v = &line[i + key.len()..];
                    seen.insert(v[..v.find('"').unwrap_or(v.len())].to_string());
                }
            }
            continue;
        };
        if !text.starts_with(' ') {
            continue;
        }
        // `[text](url)` → `text`.
        let mut plain = String::new();
        let mut rest = text.trim();
        while let Some(i) = rest.find("](") {
            let close = rest[i..].find(')').map_or(rest.len(), |c| i + c + 1);
            plain.push_str(&rest[..i]);
            rest = &rest[close..];
        }
        plain.push_str(rest);
        let slug: String = plain
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut unique = slug.clone();
        let mut n = 0;
        while seen.contains(&unique) {
            n += 1;
            unique = format!("{slug}-{n}");
        }
        seen.insert(unique);
    }
    seen
}

/// One link: where it is and what it names.
struct Link {
    at: String,
    target: String,
}

fn line_of(text: &str, byte: usize) -> usize {
    text[..byte].matches('\n').count() + 1
}

/// Relative targets of `[text](target)`, `src="..."` and `href="..."`.
fn markdown_links(file: &str, md: &str) -> Vec<Link> {
    let text = without_code_spans(&without_fences(md));
    let mut links = Vec::new();
    for (i, _) in text.match_indices("](") {
        let rest = &text[i + 2..];
        let Some(end) = rest.find(')') else { continue };
        let inner = rest[..end].trim();
        let target = match inner.strip_prefix('<') {
            Some(r) => &r[..r.find('>').unwrap_or(r.len())],
            None => inner.split_whitespace().next().unwrap_or(""),
        };
        links.push(Link {
            at: format!("{file}:{}", line_of(&text, i)),
            target: target.to_string(),
        });
    }
    for key in ["src=\"", "href=\""] {
        for (i, _) in text.match_indices(key) {
            let v = &text[i + key.len()..];
            let target = &v[..v.find('"').unwrap_or(v.len())];
            links.push(Link {
                at: format!("{file}:{}", line_of(&text, i)),
                target: target.to_string(),
            });
        }
    }
    links.retain(|l| !l.target.contains("://") && !l.target.starts_with("mailto:"));
    links
}

/// Mentions of this repository's documents (`docs/x.md`, `README.md#y`,
/// `CONTRIBUTING.md`) and GitHub links into this repository, as paths
/// from the root.
fn mentions(file: &str, text: &str, repo: &str) -> Vec<Link> {
    let mut links = Vec::new();
    let word = |c: char| c.is_ascii_alphanumeric() || "_./#-".contains(c);
    let mut start = None;
    for (i, c) in text.char_indices().chain(std::iter::once((text.len(), ' '))) {
        match (start, word(c)) {
            (None, true) => start = Some(i),
            (Some(s), false) => {
                start = None;
                // A sentence's full stop is not part of the path.
                let token = text[s..i].trim_end_matches('.');
                let path = token.split('#').next().unwrap_or("");
                let preceded = text[..s].chars().last();
                // Part of a URL or of a longer path (`src/docs/..`): judged elsewhere.
                if matches!(preceded, Some('/') | Some(':')) {
                    continue;
                }
                let doc = (path.starts_with("docs/") && path.ends_with(".md"))
                    || path == "README.md"
                    || path == "CONTRIBUTING.md";
                if doc {
                    links.push(Link {
                        at: format!("{file}:{}", line_of(text, s)),
                        target: token.to_string(),
                    });
                }
            }
            _ => {}
        }
    }
    for prefix in [
        format!("https://github.com/{repo}/"),
        "https://github.com/{{REPO}}/".into(),
        "https://github.com/{repo}/".into(),
    ] {
        for (i, _) in text.match_indices(&prefix) {
            let rest = &text[i + prefix.len()..];
            let url: String = rest
                .chars()
                .take_while(|c| !c.is_whitespace() && !"\"')`<>".contains(*c))
                .collect();
            let mut parts = url.splitn(3, '/');
            let (kind, _reference, path) = (parts.next(), parts.next(), parts.next());
            if let (Some("blob" | "tree"), Some(path)) = (kind, path) {
                links.push(Link {
                    at: format!("{file}:{}", line_of(text, i)),
                    target: path.trim_end_matches('.').to_string(),
                });
            }
        }
    }
    links
}

/// What is wrong with `link` (relative to `base`, a folder from the root), if anything.
fn broken(link: &Link, base: &Path) -> Option<String> {
    let (path, anchor) = match link.target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (link.target.as_str(), None),
    };
    let file = if path.is_empty() {
        // `#anchor`: this file.
        PathBuf::from(link.at.rsplit_once(':').unwrap().0)
    } else if let Some(from_root) = path.strip_prefix('/') {
        PathBuf::from(from_root)
    } else {
        base.join(path)
    };
    let full = root().join(&file);
    if !full.exists() {
        return Some(format!(
            "{}: `{}`: {} does not exist",
            link.at,
            link.target,
            file.display()
        ));
    }
    let anchor = anchor.filter(|a| !a.is_empty())?;
    if file.extension().is_none_or(|e| e != "md") {
        return None;
    }
    let known = anchors(&std::fs::read_to_string(&full).unwrap());
    (!known.contains(anchor)).then(|| {
        format!(
            "{}: `{}`: {} has no heading with the anchor #{anchor}",
            link.at,
            link.target,
            file.display()
        )
    })
}

#[test]
fn every_link_resolves() {
    let repo = own_repo();
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in sources() {
        let text = std::fs::read_to_string(root().join(&file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let dir = Path::new(&file).parent().unwrap().to_path_buf();
        let mut links: Vec<(Link, PathBuf)> = Vec::new();
        if file.ends_with(".md") {
            links.extend(markdown_links(&file, &text).into_iter().map(|l| (l, dir.clone())));
        }
        // Mentions and GitHub links name paths from the root.
        links.extend(mentions(&file, &text, &repo).into_iter().map(|l| (l, PathBuf::new())));
        for (link, base) in links {
            checked += 1;
            problems.extend(broken(&link, &base));
        }
    }
    assert!(problems.is_empty(), "broken links:\n{}", problems.join("\n"));
    assert!(checked > 30, "only {checked} links found: the scan is broken");
}

#[test]
fn anchors_are_named_as_github_names_them() {
    let md = "# gate\n## Set-up: two commands\n### 4. Add the workflow\n## `gate init`\n\
              ## [Gate](http://x) your own model\n## Forks\n## Forks\n```\n# not a heading\n```\n";
    let got: Vec<String> = anchors(md).into_iter().collect();
    assert_eq!(
        got,
        [
            "4-add-the-workflow",
            "forks",
            "forks-1",
            "gate",
            "gate-init",
            "gate-your-own-model",
            "set-up-two-commands"
        ]
    );
}

#[test]
fn the_scan_finds_each_kind_of_link() {
    let md = "See [a](docs/a.md#x), [b](<b c.md> \"t\"), `[no](code.md)`, [web](https://e.org) and\n\
              <img src=\"pic.png\">.\n```\n[no](fenced.md)\n```\n";
    let got: Vec<String> = markdown_links("R.md", md)
        .into_iter()
        .map(|l| format!("{} {}", l.at, l.target))
        .collect();
    assert_eq!(got, ["R.md:1 docs/a.md#x", "R.md:1 b c.md", "R.md:2 pic.png"]);
    let yml = "# See docs/quickstart.md and README.md#forks.\n# https://github.com/{{REPO}}/blob/{{REF}}/docs/x.md\n\
               # not src/docs/y.md nor comment.md\n";
    let got: Vec<String> = mentions("t.yml", yml, "o/gate")
        .into_iter()
        .map(|l| format!("{} {}", l.at, l.target))
        .collect();
    assert_eq!(
        got,
        [
            "t.yml:1 docs/quickstart.md",
            "t.yml:1 README.md#forks",
            "t.yml:2 docs/x.md"
        ]
    );
}

/// Each `https://github.com/OWNER/NAME` and `uses: OWNER/NAME` of gate
/// (NAME `gate`) in `text`, as `(line, OWNER/NAME)`.
fn gate_repo_mentions(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut starts: Vec<usize> = line
            .match_indices("github.com/")
            .map(|(i, _)| i + "github.com/".len())
            .collect();
        if let Some(i) = line.find("uses:") {
            starts.push(i + "uses:".len());
        }
        for s in starts {
            let rest = line[s..].trim_start();
            let mut parts = rest.splitn(3, '/');
            let owner = parts.next().unwrap_or("");
            let name: String = parts
                .next()
                .unwrap_or("")
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "-_.".contains(*c))
                .collect();
            let name = name.trim_end_matches(".git");
            let name = name.split('@').next().unwrap_or("");
            if name == "gate" && !owner.is_empty() && !owner.contains('{') {
                found.push((n + 1, format!("{owner}/{name}")));
            }
        }
    }
    found
}

/// Cargo.toml's `repository` is the one place that names gate's repository
/// (issue #14 item 14): every link to gate and every `uses:` of it in the
/// documents, workflows and action says the same, and while it is the
/// placeholder the README says so where a reader meets it.
#[test]
fn every_mention_of_gates_repository_is_cargo_tomls() {
    let repo = own_repo();
    let mut files = sources();
    files.push("examples/adopter/README.md".into());
    let mut problems = Vec::new();
    let mut seen = 0;
    for file in &files {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        for (line, named) in gate_repo_mentions(&text) {
            seen += 1;
            if named != repo {
                problems.push(format!(
                    "{file}:{line}: `{named}`, but Cargo.toml's repository is `{repo}`"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(seen >= 5, "only {seen} mentions found: the scan is broken");
    if repo.starts_with("OWNER/") {
        let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
        let note = readme.find("`OWNER/gate` in this README and in docs/ stands for gate's repository");
        let first = readme.find("OWNER/gate").unwrap();
        assert!(
            note.is_some_and(|n| n <= first),
            "the README explains the placeholder before its first use"
        );
    }
}

#[test]
fn the_repository_scan_finds_links_and_uses() {
    let text = "see https://github.com/acme/gate/releases and https://github.com/huggingface/candle\n\
                \x20     - uses: OWNER/gate@v1\n    uses: OWNER/gate/.github/workflows/gate-reusable.yml@v1\n\
                gate = { git = \"https://github.com/x/gate.git\" }\n    uses: {{REPO}}@{{REF}}\n";
    assert_eq!(
        gate_repo_mentions(text),
        [
            (1, "acme/gate".to_string()),
            (2, "OWNER/gate".into()),
            (3, "OWNER/gate".into()),
            (4, "x/gate".into())
        ]
    );
}

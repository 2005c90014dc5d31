//! The house, read from the source and from cargo: data flows one way
//! (spec → probe → contract → runner → report → render → github, the
//! command line on top), the framework adapters are the only crates with a
//! framework in their tree and the only ones that name one (a grep, its
//! kept lines listed with why), the command line compiles none without its
//! built-in models, and those models use nothing but the public SDK,
//! exactly as an adopter's crate does. Inside the command line, the
//! commands build on the pipeline and both on the app settings and errors,
//! never the other way, and no command on another. No production file is
//! over 800 lines and no function over 80 but those listed, with why.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The candle adapter's (crates/gate-sdk/src/) top-level modules, lowest first: a module
/// may import only those before it.
const LAYERS: &[&str] = &["sdk", "runner", "child", "harness"];

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a source file belongs to.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    first.trim_end_matches(".rs").to_string()
}

/// `crate::NAME` paths in non-test code (a `#[cfg(test)]` module ends the scan).
fn crate_refs(text: &str) -> BTreeSet<String> {
    let code = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    // Doc comments link to items anywhere (`[main!](crate::main)`): code only.
    let code: String = code
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let code = code.as_str();
    let mut refs = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let before = code[..i].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue; // `$crate::` in macros, `gate_crate::`
        }
        let rest = &code[i + "crate::".len()..];
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if !name.is_empty() {
            refs.insert(name);
        }
    }
    refs
}

fn graph() -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
    let src = Path::new(env!("GATE_REPO_ROOT")).join("crates/gate-sdk/src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut g: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for f in files {
        let m = module_of(&src, &f);
        if m == "lib" || m == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for r in crate_refs(&text) {
            if r != m {
                g.entry(m.clone())
                    .or_default()
                    .entry(r)
                    .or_default()
                    .push(f.strip_prefix(&src).unwrap().display().to_string());
            }
        }
    }
    g
}

#[test]
fn every_module_imports_only_modules_below_it() {
    let g = graph();
    let mut wrong = Vec::new();
    for (m, deps) in &g {
        let Some(mi) = LAYERS.iter().position(|l| l == m) else {
            wrong.push(format!("`{m}` is not placed in LAYERS (tests/it/architecture.rs)"));
            continue;
        };
        for (d, files) in deps {
            match LAYERS.iter().position(|l| l == d) {
                Some(di) if di < mi => {}
                Some(_) => wrong.push(format!("`{m}` imports `{d}`, which is above it ({})", files.join(", "))),
                None => wrong.push(format!("`{m}` imports `{d}`, which is not in LAYERS")),
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// gate-cli's floors, lowest first (#52): `app`/`errors` (the settings
/// every command shares, `CliError`), the `pipeline` wing (what the
/// commands run on), the `commands` wing (the clap tree in commands/mod.rs,
/// one file per subcommand); lib.rs is only the face over them.
const CLI_FLOORS: &[&str] = &["app", "errors", "pipeline", "commands"];

/// The module paths a gate-cli source file names through `crate::` or
/// `super::` (`use` or inline, `{…}` groups expanded), made absolute from
/// `module` (the file's own path: `["commands", "check"]`) and cut to two
/// segments: `use super::{comment::read_report, Cli}` in commands/merge.rs
/// gives `commands::comment` and `commands::Cli`. Comment lines are left
/// out; a test module's `super::` is read as the file's (one floor up),
/// which never names a command.
fn cli_paths(code: &str, module: &[&str]) -> Vec<Vec<String>> {
    fn ident(s: &str) -> String {
        s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
    }
    /// The paths `rest` starts with, up to `depth` segments.
    fn tails(rest: &str, depth: usize) -> Vec<Vec<String>> {
        let rest = rest.trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            let (mut level, mut items, mut cur) = (0usize, Vec::new(), String::new());
            for c in group.chars() {
                match c {
                    '}' if level == 0 => break,
                    ',' if level == 0 => items.push(std::mem::take(&mut cur)),
                    '{' => level += 1,
                    '}' => level -= 1,
                    _ => {}
                }
                if !(c == ',' && level == 0) {
                    cur.push(c);
                }
            }
            items.push(cur);
            return items.iter().flat_map(|i| tails(i, depth)).collect();
        }
        let name = ident(rest);
        if name.is_empty() {
            return vec![Vec::new()]; // `*`
        }
        match rest[name.len()..].strip_prefix("::") {
            Some(more) if depth > 1 => tails(more, depth - 1)
                .into_iter()
                .map(|t| std::iter::once(name.clone()).chain(t).collect())
                .collect(),
            _ => vec![vec![name]],
        }
    }
    let code: String = code
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    for anchor in ["crate::", "super::"] {
        for (i, _) in code.match_indices(anchor) {
            let before = code[..i].chars().last();
            // `gate_crate::`, and the 2nd `super` of `super::super::` (read with the 1st).
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') || code[..i].ends_with("::") {
                continue;
            }
            let mut rest = &code[i + anchor.len()..];
            let base: Vec<String> = if anchor == "crate::" {
                Vec::new()
            } else {
                let mut up = 1;
                while let Some(r) = rest.strip_prefix("super::") {
                    rest = r;
                    up += 1;
                }
                module[..module.len().saturating_sub(up)]
                    .iter()
                    .map(|s| s.to_string())
                    .collect()
            };
            for t in tails(rest, 2) {
                out.push(base.iter().cloned().chain(t).take(2).collect());
            }
        }
    }
    out
}

#[test]
fn the_path_reader_sees_a_command_importing_another() {
    let merge = ["commands", "merge"];
    let paths = cli_paths(
        "use super::{comment::read_report, Cli};\nuse crate::pipeline::shard;",
        &merge,
    );
    assert_eq!(
        paths,
        vec![
            vec!["pipeline".to_string(), "shard".into()],
            vec!["commands".into(), "comment".into()],
            vec!["commands".into(), "Cli".into()],
        ]
    );
    let harness = ["pipeline", "harness"];
    assert_eq!(
        cli_paths("let x = super::super::commands::check::run();", &harness),
        vec![vec!["commands".to_string(), "check".into()]]
    );
    // A comment names what it likes; `gate_crate::` is another crate.
    assert!(cli_paths("// see super::comment\nuse gate_crate::x;", &merge).is_empty());
}

/// gate-cli has a floor plan (#52): lib.rs declares only its floors, the
/// commands and the pipeline are each a folder, no command imports another
/// command, the pipeline imports no command, and `app`/`errors` import
/// neither wing (commands → pipeline → app/errors).
#[test]
fn the_command_lines_commands_and_pipeline_import_only_downward() {
    let src = Path::new(env!("GATE_REPO_ROOT")).join("crates/gate-cli/src");
    let mut wrong = Vec::new();
    for want in ["lib.rs", "app.rs", "errors.rs", "commands/mod.rs", "pipeline/mod.rs"] {
        if !src.join(want).is_file() {
            wrong.push(format!("crates/gate-cli/src/{want} is missing"));
        }
    }
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let declared: BTreeSet<&str> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod ")?.strip_suffix(';'))
        .collect();
    let floors: BTreeSet<&str> = CLI_FLOORS.iter().copied().collect();
    if declared != floors {
        wrong.push(format!(
            "crates/gate-cli/src/lib.rs declares the modules {declared:?}: a face over the floors {floors:?} only"
        ));
    }
    let commands: BTreeSet<String> = std::fs::read_dir(src.join("commands"))
        .into_iter()
        .flatten()
        .map(|e| e.unwrap().path())
        // A command is a file, or a folder of its own parts (`init/`).
        .filter(|p| p.is_dir() || p.extension().is_some_and(|x| x == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|n| n != "mod")
        .collect();
    let mut files = Vec::new();
    sources(&src, &mut files);
    for f in files {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().replace('\\', "/");
        let module: Vec<&str> = rel
            .trim_end_matches(".rs")
            .split('/')
            .filter(|s| !["mod", "lib", "main"].contains(s))
            .collect();
        let Some(floor) = module.first().copied() else {
            continue; // lib.rs, main.rs: the face
        };
        let text = std::fs::read_to_string(&f).unwrap();
        for path in cli_paths(&text, &module) {
            let to: Vec<&str> = path.iter().map(String::as_str).collect();
            let bad = match (floor, to.as_slice()) {
                ("commands", ["commands", other, ..]) => {
                    module.len() >= 2 && commands.contains(*other) && *other != module[1]
                }
                ("pipeline", ["commands", ..]) => true,
                ("app" | "errors", ["commands" | "pipeline", ..]) => true,
                _ => false,
            };
            if bad {
                wrong.push(format!(
                    "crates/gate-cli/src/{rel} imports `{}`: commands → pipeline → app/errors, and no command imports another",
                    to.join("::")
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The built-in models (crates/gate-builtins) are written as a team's crate
/// is: gate's public SDK and candle, nothing of gate's internals.
#[test]
fn the_built_in_models_use_only_the_sdk() {
    let (names, deps) = resolved();
    let id = names
        .iter()
        .find(|(_, n)| *n == "gate-builtins")
        .map(|(id, _)| id.clone())
        .unwrap();
    let gates: BTreeSet<&str> = deps[&id]
        .iter()
        .map(|d| names[d].as_str())
        .filter(|n| n.starts_with("gate-"))
        .collect();
    assert_eq!(gates, BTreeSet::from(["gate-sdk"]));
    let src = Path::new(env!("GATE_REPO_ROOT")).join("crates/gate-builtins/src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        // `registry()` in lib.rs is gate's tests' door, behind `test-support`.
        let door = f.ends_with("lib.rs") && code.matches("gate::test_support").count() <= 2;
        assert!(
            door || !code.contains("gate::test_support"),
            "{} uses gate's internals outside its tests",
            f.display()
        );
    }
}

/// `cargo tree ARGS` of the normal and build dependencies, one package a
/// line: offline first, then with the network (a cold cache).
fn cargo_tree(args: &[&str], manifest: Option<&Path>) -> std::process::Output {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let run = |offline: bool| {
        let mut cmd = std::process::Command::new(&cargo);
        cmd.arg("tree")
            .args(args)
            .args(["-e", "normal,build", "--prefix", "none"])
            .current_dir(env!("GATE_REPO_ROOT"));
        if let Some(m) = manifest {
            cmd.arg("--manifest-path").arg(m);
        }
        if offline {
            cmd.arg("--offline");
        }
        cmd.output().unwrap()
    };
    let out = run(true);
    if out.status.success() {
        out
    } else {
        run(false)
    }
}

/// The command line is the top of the house: no crate depends on it, and
/// without its built-in models (`--no-default-features`) it compiles no
/// framework (issue #39 item 1, #42 item 2).
#[test]
fn the_command_line_is_on_top_and_compiles_no_framework_without_the_built_ins() {
    let (names, deps) = resolved();
    let cli = names
        .iter()
        .find(|(_, n)| *n == "gate-cli")
        .map(|(id, _)| id.clone())
        .unwrap();
    let above: Vec<&String> = deps
        .iter()
        .filter(|(_, to)| to.contains(&cli))
        .map(|(from, _)| &names[from])
        .collect();
    assert!(above.is_empty(), "{above:?} depend on gate-cli");
    let out = cargo_tree(&["-p", "gate-cli", "--no-default-features", "--locked"], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let names: BTreeSet<&str> = text.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert!(names.contains("gate-cli") && names.contains("clap"), "{names:?}");
    let framework: Vec<&&str> = names
        .iter()
        .filter(|n| {
            [
                "candle",
                "burn",
                "cubecl",
                "tch",
                "cudarc",
                "gate-sdk",
                "gate-builtins",
                "gate-burn",
            ]
            .iter()
            .any(|f| n.starts_with(f))
        })
        .collect();
    assert!(
        framework.is_empty(),
        "gate-cli without its built-ins compiles {framework:?}"
    );
}

/// The workspace's packages and, for each, the packages its normal and
/// build dependencies resolve to (cargo's own resolution, all features).
fn resolved() -> (BTreeMap<String, String>, BTreeMap<String, Vec<String>>) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let run = |offline: bool| {
        let mut cmd = std::process::Command::new(&cargo);
        cmd.args(["metadata", "--format-version", "1", "--locked"])
            .current_dir(env!("GATE_REPO_ROOT"));
        if offline {
            cmd.arg("--offline");
        }
        cmd.output().unwrap()
    };
    let mut out = run(true);
    if !out.status.success() {
        out = run(false);
    }
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: BTreeMap<String, String> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["id"].as_str().unwrap().to_string(),
                p["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut deps = BTreeMap::new();
    for node in meta["resolve"]["nodes"].as_array().unwrap() {
        let id = node["id"].as_str().unwrap().to_string();
        let to: Vec<String> = node["deps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| {
                d["dep_kinds"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|k| k["kind"].as_str() != Some("dev"))
            })
            .map(|d| d["pkg"].as_str().unwrap().to_string())
            .collect();
        deps.insert(id, to);
    }
    (names, deps)
}

/// The framework-free crates, lowest first: each may depend only on those before it.
const CORE: &[&str] = &[
    "gate-spec",
    "gate-probe",
    "gate-contract",
    "gate-runner",
    "gate-report",
    "gate-render",
    "gate-github",
];

#[test]
fn no_core_crate_has_an_ml_framework_in_its_tree() {
    let (names, deps) = resolved();
    let id_of = |name: &str| names.iter().find(|(_, n)| n.as_str() == name).map(|(id, _)| id.clone());
    let mut wrong = Vec::new();
    for core in CORE {
        let root = id_of(core).unwrap_or_else(|| panic!("`{core}` is not a workspace package"));
        let mut seen = BTreeSet::new();
        let mut todo = vec![root.clone()];
        while let Some(id) = todo.pop() {
            if !seen.insert(id.clone()) {
                continue;
            }
            let name = &names[&id];
            if ["candle", "burn", "tch", "cudarc"].iter().any(|f| name.starts_with(f)) {
                wrong.push(format!("`{core}` has `{name}` in its dependency tree"));
            }
            todo.extend(deps.get(&id).into_iter().flatten().cloned());
        }
        for d in deps.get(&root).into_iter().flatten() {
            let dn = &names[d];
            if let Some(di) = CORE.iter().position(|c| c == dn) {
                let ci = CORE.iter().position(|c| c == core).unwrap();
                if di >= ci {
                    wrong.push(format!("`{core}` depends on `{dn}`, which is above it"));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The crates of `names` that only the command line should compile: its
/// parser, network, charts and progress bars, and `more`.
fn command_line_weight<'a>(names: &BTreeSet<&'a str>, more: &[&str]) -> Vec<&'a str> {
    const WEIGHT: &[&str] = &[
        "clap",
        "octocrab",
        "tokio",
        "hyper",
        "rustls",
        "aws-lc-rs",
        "jsonwebtoken",
        "plotters",
        "indicatif",
    ];
    names
        .iter()
        .copied()
        .filter(|n| WEIGHT.contains(n) || more.contains(n))
        .collect()
}

/// The contract (report.json, history.json, shard.json, the harness
/// protocol) is one crate a team's dashboard can depend on alone: gate's
/// spec and probe types under it, serde, and nothing of the runner, the
/// report's verdict, the renderers, the network or the command line.
#[test]
fn the_contract_crate_needs_no_runner_renderer_network_or_command_line() {
    let out = cargo_tree(&["-p", "gate-contract"], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    let names: BTreeSet<&str> = text.lines().filter_map(|l| l.split_whitespace().next()).collect();
    let gate: BTreeSet<&&str> = names.iter().filter(|n| n.starts_with("gate-")).collect();
    assert_eq!(
        gate,
        ["gate-contract", "gate-probe", "gate-spec"].iter().collect(),
        "{names:?}"
    );
    let heavy = command_line_weight(&names, &["yaml-rust2"]);
    assert!(heavy.is_empty(), "the contract compiles {heavy:?}");
}

/// What an adopter's harness compiles (examples/adopter's `ml`, gate with
/// `default-features = false` and its candle): the SDK, the runner and the
/// probe, and none of the command line's weight.
#[test]
fn an_adopters_harness_compiles_no_command_line_renderer_or_network() {
    let manifest = Path::new(env!("GATE_REPO_ROOT")).join("examples/adopter/Cargo.toml");
    let out = cargo_tree(&["-p", "ml"], Some(&manifest));
    if !out.status.success() {
        eprintln!(
            "skipped: `cargo tree` cannot resolve examples/adopter here: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let names: BTreeSet<&str> = text.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert!(names.contains("gate-sdk") && names.contains("candle-core"), "{names:?}");
    // The installed gate reads budgets.yaml; the harness gets it as JSON.
    let heavy = command_line_weight(&names, &["gate-github", "gate-render", "gate-report", "yaml-rust2"]);
    assert!(heavy.is_empty(), "the harness compiles {heavy:?}");
}

/// gate's API is what crates/gate-sdk/src/lib.rs re-exports (issue #29):
/// every module of the candle SDK is a private `mod`, the crate's own names
/// for the core crates are `pub(crate)`, the one public module is
/// `test_support`, behind its feature (gate's own tests and benches; no
/// `__private`), and the one hidden re-export is gate-runner for `main!`'s
/// expansion.
#[test]
fn the_candle_adapter_keeps_its_modules_private() {
    let src = Path::new(env!("GATE_REPO_ROOT")).join("crates/gate-sdk/src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let code: Vec<&str> = lib
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .collect();
    let ident = |s: &str| -> String { s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect() };
    let mut wrong = Vec::new();
    // Items at the crate root only: `test_support`'s body is its own.
    let mut depth = 0usize;
    for (i, l) in code.iter().enumerate() {
        let top = depth == 0;
        depth = (depth + l.matches('{').count()).saturating_sub(l.matches('}').count());
        if l.contains("__private") {
            wrong.push(format!("src/lib.rs has `{l}`"));
        }
        if !top {
            continue;
        }
        let attrs = || code[..i].iter().rev().take_while(|a| a.starts_with("#["));
        if let Some(rest) = l.strip_prefix("pub mod ") {
            let gated = attrs().any(|a| *a == "#[cfg(feature = \"test-support\")]");
            if !(ident(rest) == "test_support" && gated) {
                wrong.push(format!("src/lib.rs declares `{l}`"));
            }
        } else if let Some(rest) = l.strip_prefix("pub use ") {
            // The API: the harness, the allocator (gate-probe's) and the SDK's
            // items; and, hidden, gate-runner for `main!` (which it writes once).
            let for_main = rest == "gate_runner as __runner;" && attrs().any(|a| *a == "#[doc(hidden)]");
            if !["harness", "gate_probe", "sdk"].contains(&ident(rest).as_str()) && !for_main {
                wrong.push(format!("src/lib.rs re-exports `{l}`"));
            }
        } else if let Some(rest) = l.strip_prefix("pub extern crate ") {
            if !rest.starts_with("candle_") {
                wrong.push(format!("src/lib.rs re-exports `{l}`"));
            }
        }
    }
    // Each module of src/ (a file or a folder) is declared, plain `mod`.
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        if name == "lib" || name == "main" || !(p.is_dir() || p.extension().is_some_and(|x| x == "rs")) {
            continue;
        }
        if !code.contains(&format!("mod {name};").as_str()) {
            wrong.push(format!("src/{name} is not declared `mod {name};` in src/lib.rs"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every child gate starts gets its environment from one place (#43): a
/// `Command::new` anywhere else in gate's sources (tests excepted) would
/// hand the PR's code the token. The one place is
/// `gate_runner::child::command`.
#[test]
fn every_child_is_made_by_the_one_command_builder() {
    let root = Path::new(env!("GATE_REPO_ROOT"));
    let mut files = Vec::new();
    for krate in std::fs::read_dir(root.join("crates")).unwrap() {
        // crates/README.md sits beside the crates.
        let krate = krate.unwrap().path();
        if krate.is_dir() {
            sources(&krate.join("src"), &mut files);
        }
    }
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        // A `#[cfg(test)]` module ends the scan: tests start what they like.
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        for (i, line) in code.lines().enumerate() {
            if line.contains("Command::new(") && !line.trim_start().starts_with("//") {
                found.push(format!(
                    "{}:{}: {}",
                    f.strip_prefix(root).unwrap().display(),
                    i + 1,
                    line.trim()
                ));
            }
        }
    }
    assert_eq!(
        found.len(),
        1,
        "start children with gate_runner::child::command: {found:#?}"
    );
    assert!(
        found[0].starts_with("crates/gate-runner/src/child/command.rs:"),
        "{found:#?}"
    );
    assert!(found[0].ends_with("let mut cmd = Command::new(program);"), "{found:#?}");
}

/// The crates no framework is in: every one but the framework adapters
/// (crates/gate-sdk, crates/gate-burn) and the built-in models, written on
/// the candle SDK as a team's crate is.
const ADAPTER_CRATES: &[&str] = &["gate-sdk", "gate-burn", "gate-builtins"];

/// The field report.json's testbed and the `__resolve` answer kept from
/// before `framework` (stored reports have it): the contract names it, as
/// the wire does, and no other crate.
const LEGACY_FIELD: &str = "candle_version";

/// No crate outside the framework adapters names candle or burn: not in its
/// code, its comments, its tests or its manifest (#52). A framework's
/// versions, its checks, its settings and its words are the adapter's,
/// which the command line reads as data (`cargo metadata`, the harness's
/// `__resolve` answer, the SDK's manifest the built-in models carry); the
/// contract names only the wire's legacy field.
#[test]
fn no_crate_outside_the_adapters_names_a_framework() {
    fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() && !p.ends_with("target") {
                files(&p, out);
            } else if p
                .extension()
                .is_some_and(|x| ["rs", "toml", "yaml", "yml"].iter().any(|e| x == *e))
            {
                out.push(p);
            }
        }
    }
    let root = Path::new(env!("GATE_REPO_ROOT"));
    let mut all = Vec::new();
    let mut crates = 0;
    for krate in std::fs::read_dir(root.join("crates")).unwrap() {
        let krate = krate.unwrap().path();
        let name = krate.file_name().unwrap().to_string_lossy().into_owned();
        if krate.is_dir() && !ADAPTER_CRATES.contains(&name.as_str()) {
            files(&krate, &mut all);
            crates += 1;
        }
    }
    assert!(crates >= 8, "{crates} crates read");
    let mut found = Vec::new();
    for f in &all {
        let rel = f.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
        let text = std::fs::read_to_string(f).unwrap();
        for (i, line) in text.lines().enumerate() {
            let mut l = line.to_lowercase();
            if rel.starts_with("crates/gate-contract/") {
                l = l.replace(LEGACY_FIELD, "");
            }
            if !l.contains("candle") && !l.contains("burn") {
                continue;
            }
            found.push(format!("{rel}:{}: {}", i + 1, line.trim()));
        }
    }
    assert!(
        found.is_empty(),
        "a framework named outside its adapter:\n{}",
        found.join("\n")
    );
}

/// The most lines a production source file holds, its tests included.
const MAX_FILE_LINES: usize = 800;
/// The most lines a function of production code holds that is not a table.
const MAX_FN_LINES: usize = 80;

/// Files over [`MAX_FILE_LINES`], each with why.
const LONG_FILES: &[(&str, &str)] = &[];

/// Functions over [`MAX_FN_LINES`] (file, name), each with why: a table,
/// or one not split yet, named here so the list only shrinks.
const LONG_FNS: &[(&str, &str, &str)] = &[];

/// Every production source file of the workspace (`src/` of each crate),
/// with its text up to its `#[cfg(test)] mod tests`.
fn production_sources() -> Vec<(String, String)> {
    let root = Path::new(env!("GATE_REPO_ROOT"));
    let mut files = Vec::new();
    for krate in std::fs::read_dir(root.join("crates")).unwrap() {
        let krate = krate.unwrap().path();
        if krate.join("src").is_dir() {
            sources(&krate.join("src"), &mut files);
        }
    }
    files
        .into_iter()
        .map(|f| {
            let rel = f.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            (rel, std::fs::read_to_string(&f).unwrap())
        })
        .collect()
}

/// The functions of `code` (tests excluded) as (name, first line, lines),
/// by their braces, strings, chars and comments skipped.
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let end = lines
        .windows(2)
        .position(|w| w[0].starts_with("#[cfg(test)]") && w[1].starts_with("mod tests"))
        .unwrap_or(lines.len());
    // A line's braces, outside its strings, chars and `//` comment.
    let braces = |line: &str| -> Vec<char> {
        let mut out = Vec::new();
        let mut chars = line.chars().peekable();
        let mut in_str = false;
        while let Some(c) = chars.next() {
            match c {
                '\\' if in_str => {
                    chars.next();
                }
                '"' => in_str = !in_str,
                '\'' if !in_str => {
                    // A char literal ('{', '\''), not a lifetime.
                    let rest: String = chars.clone().take(3).collect();
                    if rest.starts_with('\\') {
                        chars.nth(2);
                    } else if rest.chars().nth(1) == Some('\'') {
                        chars.nth(1);
                    }
                }
                '/' if !in_str && chars.peek() == Some(&'/') => break,
                '{' | '}' | ';' if !in_str => out.push(c),
                _ => {}
            }
        }
        out
    };
    let mut found = Vec::new();
    for (i, line) in lines[..end].iter().enumerate() {
        let t = line.trim_start();
        if t.starts_with("//") {
            continue;
        }
        let Some(at) = t.find("fn ") else { continue };
        let before = &t[..at];
        let words_ok = before
            .split_whitespace()
            .all(|w| w.starts_with("pub") || ["const", "async", "unsafe", "extern", "\"C\""].contains(&w));
        if !words_ok {
            continue;
        }
        let name: String = t[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        let mut depth = 0i64;
        let mut opened = false;
        'scan: for (j, l) in lines[i..end].iter().enumerate() {
            for c in braces(l) {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    ';' if !opened => break 'scan, // a declaration, no body
                    _ => {}
                }
                if opened && depth == 0 {
                    found.push((name.clone(), i + 1, j + 1));
                    break 'scan;
                }
            }
        }
    }
    found
}

#[test]
fn the_function_reader_measures_a_body_and_skips_braces_in_strings() {
    let code = "fn a() {\n    let s = \"}{\";\n    let c = '{';\n    // }\n}\ntrait T {\n    fn b(&self);\n}\n\
                pub(crate) fn c<'a>(x: &'a str) -> &'a str {\n    x\n}\n";
    assert_eq!(functions(code), vec![("a".to_string(), 1, 5), ("c".to_string(), 9, 3)]);
}

/// No production file over 800 lines and no function over 80 that is not a
/// table (#52), but those [`LONG_FILES`] and [`LONG_FNS`] name; and each
/// named one is still long, so the lists only shrink.
#[test]
fn no_file_over_800_lines_and_no_function_over_80() {
    let mut wrong = Vec::new();
    let mut long_files = BTreeSet::new();
    let mut long_fns = BTreeSet::new();
    for (rel, text) in production_sources() {
        let n = text.lines().count();
        if n > MAX_FILE_LINES {
            long_files.insert(rel.clone());
            if !LONG_FILES.iter().any(|(f, _)| *f == rel) {
                wrong.push(format!("{rel}: {n} lines (at most {MAX_FILE_LINES}): split it by job"));
            }
        }
        for (name, line, len) in functions(&text) {
            if len > MAX_FN_LINES {
                long_fns.insert((rel.clone(), name.clone()));
                if !LONG_FNS.iter().any(|(f, n, _)| *f == rel && *n == name) {
                    wrong.push(format!(
                        "{rel}:{line}: fn {name} is {len} lines (at most {MAX_FN_LINES}): split it into its steps"
                    ));
                }
            }
        }
    }
    for (f, why) in LONG_FILES {
        if !long_files.contains(*f) {
            wrong.push(format!(
                "{f} is listed as long ({why}) and is not: take it off LONG_FILES"
            ));
        }
    }
    for (f, name, why) in LONG_FNS {
        if !long_fns.contains(&(f.to_string(), name.to_string())) {
            wrong.push(format!(
                "{f}: fn {name} is listed as long ({why}) and is not: take it off LONG_FNS"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The repository's root is the workspace only (#52 item 4): its manifest
/// declares no package, the candle adapter sits in crates/ beside burn's,
/// and the product's tests are a package of their own (gate-tests, in
/// tests/), so no crate dev-depends on a layer above it: a crate's
/// dev-dependency inside the workspace is itself or one its own
/// dependencies already reach.
#[test]
fn the_root_is_the_workspace_and_no_crate_dev_depends_on_a_layer_above_it() {
    let root = Path::new(env!("GATE_REPO_ROOT"));
    let manifest = manifest_at("Cargo.toml");
    assert!(
        manifest.get("package").is_none(),
        "the root Cargo.toml declares a package"
    );
    assert!(root.join("crates/gate-sdk/src/lib.rs").is_file() && !root.join("src").exists());

    let (names, deps) = resolved();
    let id_of = |name: &str| names.iter().find(|(_, n)| n.as_str() == name).map(|(id, _)| id.clone());
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![id_of(from).unwrap()];
        while let Some(id) = todo.pop() {
            if seen.insert(id.clone()) {
                todo.extend(deps.get(&id).into_iter().flatten().cloned());
            }
        }
        seen.into_iter().map(|id| names[&id].clone()).collect::<BTreeSet<_>>()
    };
    let mut wrong = Vec::new();
    let mut members = 0;
    for krate in std::fs::read_dir(root.join("crates")).unwrap() {
        let path = krate.unwrap().path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        members += 1;
        let doc: toml_edit::DocumentMut = text.parse().unwrap();
        let name = doc["package"]["name"].as_str().unwrap().to_string();
        let reached = reach(&name);
        let Some(dev) = doc.get("dev-dependencies").and_then(|d| d.as_table_like()) else {
            continue;
        };
        for (dep, _) in dev.iter() {
            if id_of(dep).is_some() && !reached.contains(dep) {
                wrong.push(format!("{name} dev-depends on {dep}, which it does not depend on"));
            }
        }
    }
    assert!(members >= 11, "{members} crates read");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Nothing depends on the tests' package.
    let tests = id_of("gate-tests").expect("tests/ is the package gate-tests");
    let on_tests: Vec<_> = deps.iter().filter(|(_, to)| to.contains(&tests)).collect();
    assert!(on_tests.is_empty(), "{on_tests:?}");
}

/// What both adapters' harness binaries share is written once, in
/// gate-runner's harness (#52 item 4): each adapter's `main!` forwards to
/// `gate_runner::adapter_main!`, which alone declares the counting
/// allocator and `main`.
#[test]
fn the_adapters_main_is_written_once_in_the_runner() {
    let root = Path::new(env!("GATE_REPO_ROOT"));
    let mut declaring = Vec::new();
    for (rel, text) in production_sources() {
        let adapter_or_runner = ["crates/gate-sdk/", "crates/gate-burn/", "crates/gate-runner/"]
            .iter()
            .any(|c| rel.starts_with(c));
        if adapter_or_runner && text.lines().any(|l| l.trim() == "#[global_allocator]") {
            declaring.push(rel);
        }
    }
    assert_eq!(declaring, ["crates/gate-runner/src/harness/mod.rs"]);
    for adapter in ["crates/gate-sdk/src/harness.rs", "crates/gate-burn/src/lib.rs"] {
        let text = std::fs::read_to_string(root.join(adapter)).unwrap();
        assert!(
            text.contains("$crate::__runner::adapter_main!($crate; $($workload),*);"),
            "{adapter}'s main! forwards to gate-runner's"
        );
    }
}

/// The tests' package lists its targets by hand (`autotests = false`: its
/// folder is the package's root, not a `tests/` under one), so a test file
/// that no `[[test]]` names would never run: every `tests/*.rs` is one, or
/// the package's build script or library.
#[test]
fn every_test_file_is_a_target_of_the_tests_package() {
    let root = Path::new(env!("GATE_REPO_ROOT"));
    let manifest = manifest_at("tests/Cargo.toml");
    let targets: BTreeSet<String> = manifest["test"]
        .as_array_of_tables()
        .expect("tests/Cargo.toml lists its [[test]] targets")
        .iter()
        .map(|t| t["path"].as_str().unwrap().to_string())
        .collect();
    let mut unlisted = Vec::new();
    for e in std::fs::read_dir(root.join("tests")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".rs") && name != "build.rs" && name != "lib.rs" && !targets.contains(&name) {
            unlisted.push(name);
        }
    }
    assert!(targets.contains("it/main.rs"), "{targets:?}");
    assert!(
        unlisted.is_empty(),
        "tests/{unlisted:?} is no [[test]] of tests/Cargo.toml: add it there, or move it into tests/it/ \
         (scripts/one-test-binary.py)"
    );
}

/// The manifest at `rel` (from the repository's root), parsed.
fn manifest_at(rel: &str) -> toml_edit::DocumentMut {
    let path = Path::new(env!("GATE_REPO_ROOT")).join(rel);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.parse().unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

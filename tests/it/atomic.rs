//! Every output file is written atomically (temp file + rename) and the
//! files as a set: all temp files are written before the first rename, so a
//! run killed with SIGKILL while writing, or whose disk fills up, leaves the
//! old set; each file is always either as it was or the complete new one,
//! never torn. Shown two ways: killed inside each file's write at each step
//! (`GATE_INJECT_WRITE_KILL=NAME:POINT`), and killed at random moments of
//! whole runs. Two runs on one folder at once write their sets one after
//! the other. Temp files are created exclusively, never through a planted
//! symlink. Left-over temp files (`.NAME.tmp.PID.RANDOM`) are removed by
//! the next run.
#![cfg(unix)]

use crate::common;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const FILES: [&str; 5] = ["report.json", "junit.xml", "comment.md", "baseline.json", "pr.json"];
const OLD_SUMMARY: &str = "## an earlier step's summary\n";

struct Fixture {
    _t: tempfile::TempDir,
    spec: PathBuf,
    out: PathBuf,
    baseline: PathBuf,
    event: PathBuf,
    summary: PathBuf,
    /// gate's TMPDIR: a run killed with SIGKILL leaves its harness request
    /// folder (its signal handler never runs), and here it goes with the
    /// test's folder instead of staying in the machine's /tmp.
    tmp: PathBuf,
}

fn fixture() -> Fixture {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().to_path_buf();
    let spec = root.join("budgets.yaml");
    std::fs::copy(Path::new(env!("GATE_REPO_ROOT")).join("examples/mlp.yaml"), &spec).unwrap();
    let event = root.join("event.json");
    let sha = |n: u32| format!("{n:040x}");
    std::fs::write(
        &event,
        serde_json::json!({
            "number": 5,
            "pull_request": {
                "number": 5,
                "base": { "ref": "main", "sha": sha(1), "repo": { "full_name": "octo/gate" } },
                "head": { "ref": "topic", "sha": sha(2), "repo": { "full_name": "octo/gate" } },
            }
        })
        .to_string(),
    )
    .unwrap();
    let f = Fixture {
        _t: t,
        spec,
        out: root.join("out"),
        baseline: root.join("baseline-in.json"),
        event,
        summary: root.join("step_summary.md"),
        tmp: root.join("tmp"),
    };
    std::fs::create_dir_all(&f.tmp).unwrap();
    // A complete run gives the baseline the next runs compare with.
    let o = command(&f, &[]).stdout(Stdio::null()).output().unwrap();
    assert!(o.status.code().is_some(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::copy(f.out.join("report.json"), &f.baseline).unwrap();
    f
}

fn command(f: &Fixture, env: &[(&str, &str)]) -> Command {
    let mut c = common::gate();
    c.current_dir(env!("GATE_REPO_ROOT"))
        .args(["check", "--budgets"])
        .arg(&f.spec)
        .arg("--baseline")
        .arg(if f.baseline.exists() {
            f.baseline.to_str().unwrap()
        } else {
            "none"
        })
        .arg("--out")
        .arg(&f.out)
        .env("GITHUB_EVENT_PATH", &f.event)
        .env("GITHUB_STEP_SUMMARY", &f.summary)
        .env("TMPDIR", &f.tmp)
        .env_remove("GATE_INJECT_WRITE_KILL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

fn old(name: &str) -> String {
    format!("OLD {name}: a complete file from an earlier run\n")
}

/// Puts a known old version of every output in place.
fn write_old(f: &Fixture) {
    std::fs::create_dir_all(&f.out).unwrap();
    for name in FILES {
        std::fs::write(f.out.join(name), old(name)).unwrap();
    }
    std::fs::write(&f.summary, OLD_SUMMARY).unwrap();
}

/// Whether `text` is a complete new version of the output `name`.
fn complete(name: &str, text: &str) -> bool {
    match name {
        "report.json" | "baseline.json" => serde_json::from_str::<serde_json::Value>(text)
            .is_ok_and(|v| v["schema"] == 1 && v["summary"]["status"].is_string()),
        "pr.json" => serde_json::from_str::<serde_json::Value>(text).is_ok_and(|v| v["number"] == 5),
        "junit.xml" => roxmltree::Document::parse(text).is_ok_and(|d| d.root_element().has_tag_name("testsuites")),
        "comment.md" => text.trim_end().ends_with("</sub>"),
        _ => unreachable!(),
    }
}

/// Each output is the old one or a complete new one; says which are new.
fn assert_old_or_new(f: &Fixture, what: &str) -> Vec<&'static str> {
    let mut new = Vec::new();
    for name in FILES {
        let text = std::fs::read_to_string(f.out.join(name)).unwrap();
        if text != old(name) {
            assert!(complete(name, &text), "{what}: {name} is torn:\n{text}");
            new.push(name);
        }
    }
    let summary = std::fs::read_to_string(&f.summary).unwrap();
    let added = summary
        .strip_prefix(OLD_SUMMARY)
        .unwrap_or_else(|| panic!("{what}: the step summary lost its old content:\n{summary}"));
    if !added.is_empty() {
        assert!(
            complete("comment.md", added),
            "{what}: the step summary is torn:\n{added}"
        );
        new.push("summary");
    }
    new
}

fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp."))
        .collect()
}

/// A clean run after the kills: every output new, no temp file left.
fn assert_recovers(f: &Fixture) {
    let s = command(f, &[]).status().unwrap();
    assert!(s.code().is_some(), "{s:?}");
    assert_eq!(assert_old_or_new(f, "after recovery").len(), FILES.len() + 1);
    assert_eq!(temp_files(&f.out), Vec::<String>::new());
    assert_eq!(temp_files(f.summary.parent().unwrap()), Vec::<String>::new());
}

#[test]
fn sigkill_inside_each_write_leaves_old_or_new_files() {
    let f = fixture();
    let summary_name = f.summary.file_name().unwrap().to_str().unwrap().to_string();
    let names: Vec<&str> = FILES.iter().copied().chain([summary_name.as_str()]).collect();
    for name in &names {
        for point in ["partial", "before_rename", "after_rename"] {
            write_old(&f);
            let spec = format!("{name}:{point}");
            let s = command(&f, &[("GATE_INJECT_WRITE_KILL", &spec)]).status().unwrap();
            assert_eq!(s.signal(), Some(9), "{spec}: killed inside the write ({s:?})");
            let new = assert_old_or_new(&f, &spec);
            // The set's temp files are all written, then the step summary is
            // appended, then the set is renamed in file order: killed while
            // writing, nothing is new; killed after NAME's rename, the
            // summary and the files up to NAME are.
            let expected: Vec<&str> = if *name == summary_name {
                if point == "after_rename" {
                    vec!["summary"]
                } else {
                    vec![]
                }
            } else if point == "after_rename" {
                let upto = FILES.iter().position(|n| n == name).unwrap();
                FILES[..=upto].iter().copied().chain(["summary"]).collect()
            } else {
                vec![]
            };
            let mut new = new;
            let mut expected = expected;
            new.sort_unstable();
            expected.sort_unstable();
            assert_eq!(new, expected, "{spec}");
        }
    }
    assert_recovers(&f);
}

/// A small xorshift: no dependency, and the seed is printed to replay a failure.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn sigkill_at_random_moments_never_tears_an_output() {
    let f = fixture();
    // How long a whole run takes here.
    write_old(&f);
    let t = Instant::now();
    command(&f, &[]).status().unwrap();
    let full = t.elapsed();
    // GATE_TEST_SEED=N replays the kill moments (as fractions of a whole
    // run) of a failed run, which printed its seed.
    let mut seed = match std::env::var("GATE_TEST_SEED") {
        Ok(s) => s.trim().parse::<u64>().expect("GATE_TEST_SEED is a number"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    } | 1;
    println!("seed {seed} (replay: GATE_TEST_SEED={seed}), a whole run takes {full:?}");
    let runs = 24;
    let mut outcomes = Vec::new();
    for i in 0..runs {
        write_old(&f);
        // Spread over the whole run, with the last third (the writes) weighted up.
        let frac = if i % 2 == 0 {
            (next(&mut seed) % 1000) as f64 / 1000.0
        } else {
            0.66 + (next(&mut seed) % 400) as f64 / 1000.0
        };
        let delay = full.mul_f64(frac);
        let mut child = command(&f, &[]).spawn().unwrap();
        std::thread::sleep(delay);
        let _ = child.kill(); // SIGKILL
        let s = child.wait().unwrap();
        let what = format!("run {i}, killed after {delay:?} ({s:?})");
        let new = assert_old_or_new(&f, &what);
        outcomes.push(format!("{delay:?}: {} new", new.len()));
        // The profile dies with its parent (no orphan keeps running).
        std::thread::sleep(Duration::from_millis(50));
    }
    println!("{}", outcomes.join("\n"));
    assert_recovers(&f);
}

#[test]
fn a_full_disk_in_the_middle_of_the_set_leaves_the_old_set() {
    let f = fixture();
    for name in FILES {
        write_old(&f);
        let spec = format!("{name}:full");
        let o = command(&f, &[("GATE_INJECT_WRITE_KILL", &spec)])
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(3), "{spec}: {stderr}");
        assert!(
            stderr.contains(&format!("cannot write {}", f.out.join(name).display())),
            "{spec}: {stderr}"
        );
        assert!(stderr.contains("hint: "), "{stderr}");
        for n in FILES {
            assert_eq!(std::fs::read_to_string(f.out.join(n)).unwrap(), old(n), "{spec}: {n}");
        }
        assert_eq!(temp_files(&f.out), Vec::<String>::new(), "{spec}");
    }
    assert_recovers(&f);
}

#[test]
fn two_runs_on_one_folder_at_once_leave_one_runs_whole_set() {
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("out");
    let spec = |name: &str| {
        let p = t.path().join(format!("{name}.yaml"));
        std::fs::write(
            &p,
            format!("version: 1\ndevice: {{ name: card, capacity: 4 GiB, reserve: 300 MiB }}\ndefaults: {{ seed: 7, timing: {{ warmup: 0, steps: 1 }} }}\ncomponents:\n  {name}:\n    workload: mlp\n    batch_size: 4\n    config: {{ input_dim: 8, hidden_dim: 8, hidden_layers: 1, output_dim: 2 }}\n    budgets:\n      params: < 64 MiB\n"),
        )
        .unwrap();
        p
    };
    // Names no rendered text carries by itself (the comment has `xychart-beta`).
    let (a, b) = (spec("alpha_run"), spec("beta_run"));
    let run = |spec: &Path| {
        common::gate()
            .args(["check", "--baseline", "none", "--budgets"])
            .arg(spec)
            .arg("--out")
            .arg(&out)
            .env_remove("GATE_INJECT_WRITE_KILL")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    for round in 0..4 {
        let (mut x, mut y) = (run(&a), run(&b));
        assert_eq!(x.wait().unwrap().code(), Some(0));
        assert_eq!(y.wait().unwrap().code(), Some(0));
        let report = std::fs::read_to_string(out.join("report.json")).unwrap();
        let winner = if report.contains("\"alpha_run\"") {
            "alpha_run"
        } else {
            "beta_run"
        };
        let loser = if winner == "alpha_run" { "beta_run" } else { "alpha_run" };
        for n in ["report.json", "junit.xml", "comment.md"] {
            let text = std::fs::read_to_string(out.join(n)).unwrap();
            assert!(
                text.contains(winner) && !text.contains(loser),
                "round {round}: {n} is not from the same run as report.json ({winner}):\n{text}"
            );
        }
        assert_eq!(temp_files(&out), Vec::<String>::new());
    }
}

#[test]
fn planted_symlinks_are_never_written_through() {
    let f = fixture();
    write_old(&f);
    let victim = f.out.parent().unwrap().join("victim.txt");
    std::fs::write(&victim, "precious\n").unwrap();
    // A link in place of an output, and links under names a temp file of
    // the next pid or two would have had with the old `.NAME.tmp.PID` scheme.
    std::fs::remove_file(f.out.join("report.json")).unwrap();
    std::os::unix::fs::symlink(&victim, f.out.join("report.json")).unwrap();
    for pid in 0..64 {
        let _ = std::os::unix::fs::symlink(&victim, f.out.join(format!(".junit.xml.tmp.{pid}")));
    }
    let s = command(&f, &[]).status().unwrap();
    assert!(s.code().is_some(), "{s:?}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    let meta = std::fs::symlink_metadata(f.out.join("report.json")).unwrap();
    assert!(meta.file_type().is_file(), "report.json is a new file, not the link");
    assert!(complete(
        "report.json",
        &std::fs::read_to_string(f.out.join("report.json")).unwrap()
    ));
}

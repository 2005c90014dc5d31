//! Several cards' baselines side by side in one store (#51 item 4), through
//! the built `gate` against the fake GitHub: `gate baseline publish` keeps
//! each card's report (and anchor) in its own folder, so a second card's
//! publish of the same commit replaces nothing; a run is compared with its
//! own card's nearest report even where another card's is nearer; a store
//! written before cards (`reports/<sha>.json`) is still read; and where only
//! another card's report is stored, the run says so and compares no bytes.
//!
//! The runs here measure on the CPU (card `cpu-<arch>`); the other card's
//! reports are the CPU run's with an H100's testbed and other figures, so
//! which report a run was compared with shows in its numbers.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

use crate::common::{self, output_text};
use crate::github_fake::{self, Fake, REPO, TOKEN};

const SPEC: &str = "version: 1
anchor: v1.4.0
device: { name: card, capacity: 4 GiB, reserve: 300 MiB }
defaults: { seed: 7, tolerance: 5%, drift: 6% }
components:
  mlp:
    workload: mlp
    batch_size: 64
    config: { input_dim: 256, hidden_dim: 256, hidden_layers: 2, output_dim: 3 }
    budgets:
      params: < 1 MiB
      training_peak: < 8 MiB
";

const H100: &str = "NVIDIA H100 80GB HBM3";

fn cpu_card() -> String {
    format!("cpu-{}", std::env::consts::ARCH)
}

fn h100_card() -> String {
    format!("cuda-nvidia-h100-80gb-hbm3-{}", std::env::consts::ARCH)
}

fn sha(n: u32) -> String {
    format!("{n:040x}")
}

/// `gate` with a GitHub environment pointed at `fake` (and `event`, a pull request's).
fn gate(fake: &Fake, event: Option<&Path>) -> Command {
    let mut c = common::gate();
    c.current_dir(env!("GATE_REPO_ROOT"));
    for k in [
        "GITHUB_ACTIONS",
        "GITHUB_STEP_SUMMARY",
        "GITHUB_SHA",
        "GITHUB_EVENT_NAME",
        "GITHUB_EVENT_PATH",
        "NO_COLOR",
    ] {
        c.env_remove(k);
    }
    c.env("GATE_GITHUB_TIMEOUT_MS", "5000")
        .env("GATE_GITHUB_ATTEMPTS", "3")
        .env("GATE_GITHUB_BACKOFF_MS", "10")
        .env("GITHUB_API_URL", &fake.url)
        .env("GITHUB_TOKEN", TOKEN)
        .env("GITHUB_REPOSITORY", REPO);
    if let Some(e) = event {
        c.env("GITHUB_EVENT_PATH", e);
    }
    c
}

fn json_at(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The spec, and the CPU run's report (no baseline, no anchor) in `dir/cpu`.
fn seed(fake: &Fake, dir: &Path) -> (PathBuf, Value) {
    let spec = dir.join("budgets.yaml");
    std::fs::write(&spec, SPEC).unwrap();
    let out = dir.join("cpu");
    let o = gate(fake, None)
        .args([
            "check",
            "--baseline",
            "none",
            "--anchor",
            "none",
            "--jobs",
            "1",
            "--budgets",
        ])
        .arg(&spec)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    (spec, json_at(&out.join("report.json")))
}

/// The CPU run's report as an H100 measured it: its testbed, and every
/// size three times the CPU's, written as `dir/h100/report.json`.
fn as_h100(cpu: &Value, dir: &Path) -> (PathBuf, Value) {
    let mut r = cpu.clone();
    r["testbed"]["backend"] = json!("cuda");
    r["testbed"]["device_name"] = json!(H100);
    r["testbed"]["driver"] = json!("580.65.06");
    r["testbed"]["cuda"] = json!("13.0");
    for m in r["components"]["mlp"]["metrics"].as_object_mut().unwrap().values_mut() {
        if m["unit"] == "bytes" {
            m["value"] = json!(m["value"].as_f64().unwrap() * 3.0);
        }
    }
    let out = dir.join("h100");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("report.json"), serde_json::to_string_pretty(&r).unwrap()).unwrap();
    (out, r)
}

fn publish(fake: &Fake, from: &Path, commit: &str, anchor: bool) -> Output {
    let mut c = gate(fake, None);
    c.args(["baseline", "publish", "--sha", commit]);
    if anchor {
        c.args(["--anchor", "v1.4.0"]);
    }
    let o = c.arg("--from").arg(from).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    o
}

/// A pull request whose merge-base is `chain[1]`, checked on the CPU.
fn check_pr(fake: &Fake, dir: &Path, spec: &Path, chain: &[String]) -> (Output, Value) {
    fake.state.lock().unwrap().merge_base = Some(chain[1].clone());
    let event = dir.join("event.json");
    let ev = github_fake::event(
        "pull-request-opened",
        json!({
            "number": 77,
            "pull_request": {
                "number": 77,
                "base": { "ref": "main", "sha": chain[0], "repo": { "full_name": REPO } },
                "head": { "ref": "topic", "sha": sha(0xfeed), "repo": { "full_name": REPO } },
            }
        }),
    );
    std::fs::write(&event, ev.to_string()).unwrap();
    let out = dir.join("pr");
    let o = gate(fake, Some(&event))
        .args(["check", "--jobs", "1", "--budgets"])
        .arg(spec)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", output_text(&o));
    (o, json_at(&out.join("report.json")))
}

fn result<'a>(report: &'a Value, metric: &str) -> &'a Value {
    report["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["component"] == "mlp" && r["metric"] == metric)
        .unwrap()
}

fn value(report: &Value, metric: &str) -> f64 {
    report["components"]["mlp"]["metrics"][metric]["value"]
        .as_f64()
        .unwrap()
}

fn warnings(report: &Value) -> Vec<String> {
    report["summary"]["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect()
}

const OTHER_TESTBED: &str = "baseline from a different testbed: not compared";

#[test]
fn two_cards_publish_into_one_store_and_a_run_is_compared_with_its_own_cards_baseline() {
    let fake = Fake::start();
    let tmp = tempfile::tempdir().unwrap();
    let (spec, cpu) = seed(&fake, tmp.path());
    let (h100_dir, h100) = as_h100(&cpu, tmp.path());
    let chain: Vec<String> = (0..6).map(|i| sha(0xc00 + i)).collect();
    fake.add_chain(&chain);

    // Both cards publish chain[3] (and the anchor): neither replaces the other.
    let o = publish(&fake, &tmp.path().join("cpu"), &chain[3], true);
    let cpu_file = format!("reports/{}/{}.json", cpu_card(), chain[3]);
    assert!(
        output_text(&o).contains(&format!("stored {cpu_file}")),
        "{}",
        output_text(&o)
    );
    let o = publish(&fake, &h100_dir, &chain[3], true);
    let h100_file = format!("reports/{}/{}.json", h100_card(), chain[3]);
    assert!(
        output_text(&o).contains(&format!("stored {h100_file}")),
        "{}",
        output_text(&o)
    );
    for (file, backend) in [(&cpu_file, "cpu"), (&h100_file, "cuda")] {
        let stored: Value = serde_json::from_str(&fake.file(file).expect(file)).unwrap();
        assert_eq!(stored["testbed"]["backend"], backend, "{file}");
        assert_eq!(stored["commit"], json!(chain[3]));
    }
    for card in [cpu_card(), h100_card()] {
        assert!(fake.file(&format!("anchors/{card}/v1.4.0.json")).is_some(), "{card}");
    }
    assert!(fake.file(&format!("reports/{}.json", chain[3])).is_none());
    // The H100 also published a nearer commit: the nearest report is the H100's.
    publish(&fake, &h100_dir, &chain[2], false);

    let (o, pr) = check_pr(&fake, tmp.path(), &spec, &chain);
    let log = output_text(&o);
    assert!(
        log.contains(&format!(
            "the report of {} on {}, 1 first-parent steps",
            chain[2],
            h100_card()
        )),
        "{log}"
    );
    assert!(
        log.contains(&format!(
            "the report of {} on {}, 2 first-parent steps",
            chain[3],
            cpu_card()
        )),
        "{log}"
    );
    // Compared with the CPU's report of chain[3], byte for byte, and the
    // drift measured since the CPU's anchor.
    assert_eq!(pr["baseline"]["commit"], json!(chain[3]), "{log}");
    assert_eq!(pr["baseline"]["comparable"], json!(true), "{log}");
    for metric in ["params", "training_peak"] {
        assert_eq!(
            result(&pr, metric)["baseline"].as_f64(),
            Some(value(&cpu, metric)),
            "{metric}"
        );
        assert_ne!(value(&h100, metric), value(&cpu, metric));
    }
    let drift = &result(&pr, "params")["drift"];
    assert_eq!(drift["anchor_value"].as_f64(), Some(value(&cpu, "params")), "{drift}");
    assert_eq!(drift["exceeded"], json!(false));
    assert!(
        !warnings(&pr)
            .iter()
            .any(|w| w.starts_with(OTHER_TESTBED) || w.starts_with("no ")),
        "{:?}",
        warnings(&pr)
    );
    let kept = json_at(&tmp.path().join("pr/baseline.json"));
    assert_eq!(kept["testbed"]["backend"], "cpu");
}

#[test]
fn a_store_written_before_cards_is_still_read_beside_another_cards_folder() {
    let fake = Fake::start();
    let tmp = tempfile::tempdir().unwrap();
    let (spec, cpu) = seed(&fake, tmp.path());
    let (h100_dir, _) = as_h100(&cpu, tmp.path());
    let chain: Vec<String> = (0..6).map(|i| sha(0xd00 + i)).collect();
    fake.add_chain(&chain);
    // The CPU's report and anchor as a gate of before cards stored them.
    let mut old = cpu.clone();
    old["commit"] = json!(chain[4]);
    fake.store_file(&format!("reports/{}.json", chain[4]), &old.to_string());
    fake.store_file("anchors/v1.4.0.json", &old.to_string());
    // Then an H100 publishes a nearer commit, and its anchor, in its folder.
    publish(&fake, &h100_dir, &chain[2], true);
    assert!(fake.file(&format!("reports/{}.json", chain[2])).is_none());
    assert_eq!(fake.file("anchors/v1.4.0.json"), Some(old.to_string()));

    let (o, pr) = check_pr(&fake, tmp.path(), &spec, &chain);
    let log = output_text(&o);
    assert!(
        log.contains(&format!("the report of {}, 3 first-parent steps", chain[4])),
        "{log}"
    );
    assert_eq!(pr["baseline"]["commit"], json!(chain[4]), "{log}");
    assert_eq!(pr["baseline"]["comparable"], json!(true), "{log}");
    assert_eq!(result(&pr, "params")["baseline"].as_f64(), Some(value(&cpu, "params")));
    let drift = &result(&pr, "params")["drift"];
    assert_eq!(drift["anchor_commit"], json!(chain[4]), "{drift}");
    assert_eq!(drift["anchor_value"].as_f64(), Some(value(&cpu, "params")));
}

#[test]
fn where_only_another_cards_report_is_stored_the_run_says_so_and_compares_no_bytes() {
    let fake = Fake::start();
    let tmp = tempfile::tempdir().unwrap();
    let (spec, cpu) = seed(&fake, tmp.path());
    let (_, mut h100) = as_h100(&cpu, tmp.path());
    let chain: Vec<String> = (0..6).map(|i| sha(0xe00 + i)).collect();
    fake.add_chain(&chain);
    h100["commit"] = json!(chain[3]);
    // As `gate baseline publish` on the H100 stores them.
    fake.store_file(&format!("reports/{}/{}.json", h100_card(), chain[3]), &h100.to_string());
    fake.store_file(&format!("anchors/{}/v1.4.0.json", h100_card()), &h100.to_string());

    let (o, pr) = check_pr(&fake, tmp.path(), &spec, &chain);
    let log = output_text(&o);
    assert_eq!(pr["baseline"]["commit"], json!(chain[3]), "{log}");
    assert_eq!(pr["baseline"]["comparable"], json!(false), "{log}");
    let warnings = warnings(&pr);
    let other = warnings.iter().find(|w| w.starts_with(OTHER_TESTBED)).expect("said");
    assert!(other.contains(&format!("baseline: cuda on {H100}")), "{other}");
    assert!(
        warnings.iter().any(|w| w.starts_with("no drift judged")),
        "{warnings:?}"
    );
    assert!(
        pr["summary"]["warning_kinds"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k.to_string().contains("different_testbed")),
        "{}",
        pr["summary"]
    );
    // No figure was compared with the H100's.
    for r in pr["results"].as_array().unwrap() {
        assert!(r["baseline"].is_null(), "{r}");
        assert!(r["drift"].is_null(), "{r}");
    }
    assert!(log.contains(&format!("warning: {OTHER_TESTBED}")), "{log}");
}

/// A regressed budget's history (the comment's) is the compared card's:
/// its folder's older reports, then one stored before cards, never another
/// card's. Each card's nearest report costs one read, and the anchors one
/// read of their folder and one a card.
#[test]
fn the_history_of_a_regression_is_the_compared_cards_and_each_card_costs_one_read() {
    let fake = Fake::start();
    let tmp = tempfile::tempdir().unwrap();
    let (spec, cpu) = seed(&fake, tmp.path());
    let (_, h100) = as_h100(&cpu, tmp.path());
    let chain: Vec<String> = (0..8).map(|i| sha(0xf00 + i)).collect();
    fake.add_chain(&chain);
    // Stored CPU figures 20 % below this run's: it regresses against them.
    let at = |report: &Value, commit: &str| {
        let mut r = report.clone();
        r["commit"] = json!(commit);
        let params = &mut r["components"]["mlp"]["metrics"]["params"]["value"];
        *params = json!((params.as_f64().unwrap() * 0.8).round());
        r.to_string()
    };
    let (cpu_card, h100_card) = (cpu_card(), h100_card());
    fake.store_file(&format!("reports/{}.json", chain[6]), &at(&cpu, &chain[6]));
    for i in [3, 5] {
        fake.store_file(&format!("reports/{cpu_card}/{}.json", chain[i]), &at(&cpu, &chain[i]));
    }
    for i in [2, 4] {
        fake.store_file(&format!("reports/{h100_card}/{}.json", chain[i]), &at(&h100, &chain[i]));
    }
    fake.store_file(&format!("anchors/{cpu_card}/v1.4.0.json"), &at(&cpu, &chain[5]));
    fake.store_file(&format!("anchors/{h100_card}/v1.4.0.json"), &at(&h100, &chain[4]));

    let (o, pr) = check_pr(&fake, tmp.path(), &spec, &chain);
    let log = output_text(&o);
    assert_eq!(o.status.code(), Some(1), "{log}");
    assert_eq!(pr["baseline"]["commit"], json!(chain[3]), "{log}");
    assert_eq!(result(&pr, "params")["status"], "regressed", "{log}");
    let history = json_at(&tmp.path().join("pr/history.json"));
    let params = history["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["metric"] == "params")
        .expect("params' history");
    let commits: Vec<Value> = params["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["commit"].clone())
        .collect();
    assert_eq!(
        commits,
        vec![json!(chain[6]), json!(chain[5]), json!(chain[3]), Value::Null],
        "oldest first: {params}"
    );
    // The walk: the H100's report at chain[2], the CPU's at chain[3], the
    // one of before cards at chain[6] (the CPU's again: left); the
    // history: chain[5], then chain[6] read again.
    let reads: Vec<String> = fake
        .log()
        .iter()
        .filter(|r| r.method == "GET" && r.path.contains("/contents/reports/"))
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(reads.len(), 5, "{reads:#?}");
    assert_eq!(fake.count("GET", "/contents/anchors?"), 1, "{:#?}", fake.log());
    assert_eq!(fake.count("GET", "/contents/anchors/"), 2, "{:#?}", fake.log());
}

/// A store too large for one listing (GitHub's `truncated`) learns its
/// cards from the `reports/` folder and probes each a commit; a store
/// branch whose name has a `/` lists `reports/` and each card's folder
/// through the contents API. Either way the run gets its own card's.
#[test]
fn a_truncated_listing_and_a_slashed_branch_find_each_cards_report() {
    let fake = Fake::start();
    let tmp = tempfile::tempdir().unwrap();
    let (spec, cpu) = seed(&fake, tmp.path());
    let (_, mut h100) = as_h100(&cpu, tmp.path());
    let chain: Vec<String> = (0..6).map(|i| sha(0xa00 + i)).collect();
    fake.add_chain(&chain);
    h100["commit"] = json!(chain[2]);
    fake.store_file(&format!("reports/{}/{}.json", h100_card(), chain[2]), &h100.to_string());
    let mut own = cpu.clone();
    own["commit"] = json!(chain[3]);
    fake.store_file(&format!("reports/{}/{}.json", cpu_card(), chain[3]), &own.to_string());
    fake.state.lock().unwrap().tree_truncated = true;
    let (o, pr) = check_pr(&fake, tmp.path(), &spec, &chain);
    assert_eq!(pr["baseline"]["commit"], json!(chain[3]), "{}", output_text(&o));
    assert_eq!(pr["baseline"]["comparable"], json!(true));
    assert_eq!(fake.count("GET", "/contents/reports?ref=gate-baselines"), 1);

    fake.state.lock().unwrap().tree_truncated = false;
    let before = fake.count("GET", "/git/trees/");
    let out = tmp.path().join("slashed");
    let event = tmp.path().join("event.json");
    let o = gate(&fake, Some(&event))
        .args([
            "check",
            "--jobs",
            "1",
            "--baseline-branch",
            "gate/baselines",
            "--budgets",
        ])
        .arg(&spec)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", output_text(&o));
    assert_eq!(fake.count("GET", "/git/trees/"), before);
    assert_eq!(
        fake.count("GET", &format!("/contents/reports/{}?ref=gate/baselines", cpu_card())),
        1
    );
    let pr = json_at(&out.join("report.json"));
    assert_eq!(pr["baseline"]["commit"], json!(chain[3]), "{}", output_text(&o));
}

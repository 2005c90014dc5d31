//! `gate history`: a metric over stored reports, oldest first, with its
//! budget and the change from one report to the next, from a folder or
//! from the baseline branch of a local git repository.

use crate::common;

use std::path::Path;
use std::process::Command;

fn gate(dir: &Path, args: &[&str]) -> std::process::Output {
    common::gate().args(args).current_dir(dir).output().unwrap()
}

fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// A report of the MLP at `hidden` width, measured for real.
fn report(dir: &Path, hidden: usize) -> String {
    let spec = format!(
        "version: 1\ndevice: {{ name: card, capacity: 4 GiB }}\ncomponents:\n  mlp:\n    workload: mlp\n    batch_size: 64\n    config: {{ input_dim: 64, hidden_dim: {hidden} }}\n    budgets: {{ training_peak: < 8 MiB }}\n"
    );
    std::fs::write(dir.join("budgets.yaml"), spec).unwrap();
    let out = dir.join("out");
    let o = gate(dir, &["check", "--baseline", "none", "--out", out.to_str().unwrap()]);
    assert!(
        o.status.code() == Some(0) || o.status.code() == Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::read_to_string(out.join("report.json")).unwrap()
}

fn table_values(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .skip(3)
        .map(|l| l.split_whitespace().nth(2).unwrap_or("").to_string())
        .collect()
}

#[test]
fn the_baseline_branch_in_commit_order_shows_the_drift() {
    let t = tempfile::tempdir().unwrap();
    let repo = t.path();
    git(repo, &["init", "-q", "-b", "main"]);
    let mut shas = Vec::new();
    let mut stored = Vec::new();
    for hidden in [128, 160, 192] {
        std::fs::write(repo.join("model.txt"), hidden.to_string()).unwrap();
        git(repo, &["add", "model.txt"]);
        git(repo, &["commit", "-q", "-m", &format!("width {hidden}")]);
        let sha = git(repo, &["rev-parse", "HEAD"]);
        let r = with_commit(&report(repo, hidden), &sha);
        stored.push((sha.clone(), r));
        shas.push(sha);
    }
    // The store: an orphan branch with reports/<sha>.json, newest first in its history.
    git(repo, &["checkout", "-q", "--orphan", "gate-baselines"]);
    git(repo, &["rm", "-q", "-rf", "--cached", "."]);
    std::fs::create_dir_all(repo.join("reports")).unwrap();
    for (sha, r) in stored.iter().rev() {
        std::fs::write(repo.join(format!("reports/{sha}.json")), r).unwrap();
    }
    git(repo, &["add", "reports"]);
    git(repo, &["commit", "-q", "-m", "baselines"]);
    git(repo, &["checkout", "-q", "-f", "main"]);
    let o = gate(repo, &["history", "mlp.training_peak", "--branch", "main"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let commits: Vec<&str> = stdout
        .lines()
        .skip(3)
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    let short: Vec<String> = shas.iter().map(|s| s[..10].to_string()).collect();
    assert_eq!(commits, short, "oldest first:\n{stdout}");
    let values = table_values(&stdout);
    assert_eq!(values.len(), 3, "{stdout}");
    assert!(stdout.contains("< 8.000 MiB"), "the budget is shown: {stdout}");
    // Each wider MLP holds more: every change after the first is positive.
    let changes: Vec<&str> = stdout
        .lines()
        .skip(4)
        .map(|l| l.split_whitespace().last().unwrap())
        .collect();
    assert!(changes.iter().all(|c| c.starts_with('+')), "{stdout}");
}

/// The report's commit set to `sha` (gate check records the checkout it runs in).
fn with_commit(report: &str, sha: &str) -> String {
    let mut v: serde_json::Value = serde_json::from_str(report).unwrap();
    v["commit"] = serde_json::Value::String(sha.to_string());
    serde_json::to_string_pretty(&v).unwrap()
}

#[test]
fn a_folder_of_reports_and_a_misspelt_metric() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let reports = dir.join("reports");
    std::fs::create_dir_all(&reports).unwrap();
    for (i, hidden) in [96, 128].into_iter().enumerate() {
        let r = report(dir, hidden);
        std::fs::write(reports.join(format!("r{i}.json")), r).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let o = gate(
        dir,
        &["history", "training_peak", "--reports", reports.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(table_values(&String::from_utf8_lossy(&o.stdout)).len(), 2);
    let o = gate(
        dir,
        &["history", "trainig_peak", "--reports", reports.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("did you mean `training_peak`?"));
}

/// A store of several cards (#51 item 4): `gate history` reads one card's
/// folder, where a commit has none the report stored before cards
/// (`reports/<sha>.json`), and asks which card where there are several.
#[test]
fn a_store_of_several_cards_shows_the_card_asked_for() {
    let t = tempfile::tempdir().unwrap();
    let repo = t.path();
    git(repo, &["init", "-q", "-b", "main"]);
    let mut stored = Vec::new();
    for hidden in [128, 160, 192] {
        std::fs::write(repo.join("model.txt"), hidden.to_string()).unwrap();
        git(repo, &["add", "model.txt"]);
        git(repo, &["commit", "-q", "-m", &format!("width {hidden}")]);
        let sha = git(repo, &["rev-parse", "HEAD"]);
        stored.push((sha.clone(), with_commit(&report(repo, hidden), &sha)));
    }
    let cpu = format!("cpu-{}", std::env::consts::ARCH);
    let h100 = format!("cuda-nvidia-h100-80gb-hbm3-{}", std::env::consts::ARCH);
    git(repo, &["checkout", "-q", "--orphan", "gate-baselines"]);
    git(repo, &["rm", "-q", "-rf", "--cached", "."]);
    for dir in [format!("reports/{cpu}"), format!("reports/{h100}")] {
        std::fs::create_dir_all(repo.join(dir)).unwrap();
    }
    for (i, (sha, r)) in stored.iter().enumerate() {
        // The first CPU report as a gate of before cards stored it.
        let cpu_file = match i {
            0 => format!("reports/{sha}.json"),
            _ => format!("reports/{cpu}/{sha}.json"),
        };
        std::fs::write(repo.join(cpu_file), r).unwrap();
        let mut v: serde_json::Value = serde_json::from_str(r).unwrap();
        v["testbed"]["backend"] = "cuda".into();
        v["testbed"]["device_name"] = "NVIDIA H100 80GB HBM3".into();
        let peak = &mut v["components"]["mlp"]["metrics"]["training_peak"]["value"];
        *peak = (peak.as_f64().unwrap() * 3.0).into();
        std::fs::write(repo.join(format!("reports/{h100}/{sha}.json")), v.to_string()).unwrap();
    }
    git(repo, &["add", "reports"]);
    git(repo, &["commit", "-q", "-m", "baselines"]);
    git(repo, &["checkout", "-q", "-f", "main"]);

    let o = gate(repo, &["history", "mlp.training_peak", "--branch", "main"]);
    assert_eq!(o.status.code(), Some(2), "{}", common::output_text(&o));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("holds several cards' reports"), "{e}");
    assert!(
        e.contains(&format!("hint: pass --card with one of: {h100}, {cpu}"))
            || e.contains(&format!("hint: pass --card with one of: {cpu}, {h100}")),
        "{e}"
    );

    let shown = |card: &str| {
        let o = gate(
            repo,
            &["history", "mlp.training_peak", "--branch", "main", "--card", card],
        );
        assert_eq!(o.status.code(), Some(0), "{}", common::output_text(&o));
        let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
        let values: Vec<f64> = table_values(&stdout).iter().map(|v| v.parse().unwrap()).collect();
        assert_eq!(values.len(), 3, "{stdout}");
        values
    };
    let (on_cpu, on_h100) = (shown(&cpu), shown(&h100));
    for (c, h) in on_cpu.iter().zip(&on_h100) {
        assert!((h / c - 3.0).abs() < 0.01, "{on_cpu:?} {on_h100:?}");
    }
    let o = gate(repo, &["history", "mlp.training_peak", "--card", "cuda-a100"]);
    assert_eq!(o.status.code(), Some(2), "{}", common::output_text(&o));
}

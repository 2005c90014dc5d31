//! `gate check --shard I/N`: which components shard I of N profiles, and
//! the `shard.json` it leaves beside its report so that `gate merge` can
//! tell a complete set of shards from one with a shard missing.
//!
//! The split: the spec's components (a variant, `NAME@VARIANT`, goes with
//! its component, as its ratio budgets compare it with that component),
//! sorted by name, dealt round-robin: the k-th (from 0) goes to shard
//! k mod N + 1. Sorted round-robin, not a hash of the name: a hash leaves
//! shards empty or doubled when there are few components (3 components over
//! 3 shards would often be 2-1-0), while dealing keeps every shard within
//! one component of the others, and the same spec always splits the same
//! way on every runner. Adding a component may move others to another
//! shard, which costs nothing: every run measures afresh, and `gate merge`
//! needs only that each component is in exactly one shard.
//!
//! What a shard can judge: its own components' budgets, including their
//! variants' ratio budgets. What it cannot: an ensemble budget whose
//! members lie in other shards; those rows are "not measured" in the
//! shard's report, and `gate merge`, which decides again over every
//! component, judges them as an unsharded run would.

use std::path::Path;

use super::CliError;
use gate_spec::hint::Problem;

use gate_contract::shard::{Record, Shard};

/// The most bytes of `shard.json` read (a few numbers and names).
const MAX_BYTES: u64 = 1 << 20;

/// The most shards (a matrix of GitHub Actions has at most 256 jobs).
pub(super) const MAX_COUNT: usize = 256;

/// Parses `I/N`, with `1 <= I <= N <= 256`.
pub(super) fn parse(text: &str) -> Result<Shard, CliError> {
    let bad = |why: &str| {
        CliError::Usage(Problem::new(format!("--shard {text}: {why}")).with_hint(
            "write --shard I/N with 1 <= I <= N, e.g. --shard 2/3 for the second of three shards \
               (in a matrix: --shard ${{ matrix.shard }}/N with shard: [1, 2, ..., N])",
        ))
    };
    let (i, n) = text.trim().split_once('/').ok_or_else(|| bad("not of the form I/N"))?;
    let number = |s: &str| s.trim().parse::<usize>().ok();
    let (Some(index), Some(count)) = (number(i), number(n)) else {
        return Err(bad("I and N must be whole numbers"));
    };
    if count == 0 || count > MAX_COUNT {
        return Err(bad(&format!("N must be from 1 to {MAX_COUNT}")));
    }
    if index == 0 || index > count {
        return Err(bad(&format!("I must be from 1 to N ({count})")));
    }
    Ok(Shard { index, count })
}

/// The component (not variant) a name belongs to: `tft@plain` → `tft`.
pub(super) fn base(name: &str) -> &str {
    gate_spec::name::base_of(name)
}

/// The components of `names` (variants left out: they follow their
/// component) that `shard` holds, sorted.
pub(super) fn components<'a>(names: impl IntoIterator<Item = &'a str>, shard: Shard) -> Vec<String> {
    let mut all: Vec<&str> = names.into_iter().map(base).collect();
    all.sort_unstable();
    all.dedup();
    all.into_iter()
        .enumerate()
        .filter(|(k, _)| k % shard.count + 1 == shard.index)
        .map(|(_, n)| n.to_string())
        .collect()
}

/// Reads `dir/shard.json`: `None` when there is none (an unsharded run).
pub(super) fn read(dir: &Path) -> Result<Option<Record>, CliError> {
    let path = dir.join(gate_contract::shard::FILE);
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    let bad = |why: String| {
        CliError::Usage(
            Problem::new(format!("{}: {why}", path.display()))
                .with_hint("merge the output folders of `gate check --shard I/N` as they were written"),
        )
    };
    let text = gate_report::input::read_regular(&path, MAX_BYTES).map_err(|e| bad(e.to_string()))?;
    let r: Record = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    if r.shard.index == 0 || r.shard.index > r.shard.count || r.shard.count > MAX_COUNT {
        return Err(bad(format!("shard {} is not a shard", r.shard)));
    }
    Ok(Some(r))
}

/// Checks that the folders given to `gate merge` are every shard of one
/// split, once each: a missing shard would leave its components "not
/// measured" (only a warning without --strict) where an unsharded run
/// measured them, so it is refused (exit 3: a shard's job did not deliver).
pub(super) fn check_complete(records: &[(String, Option<Record>)]) -> Result<(), CliError> {
    let sharded: Vec<(&str, &Record)> = records
        .iter()
        .filter_map(|(d, r)| r.as_ref().map(|r| (d.as_str(), r)))
        .collect();
    let Some((first_dir, first)) = sharded.first() else {
        return Ok(());
    };
    if let Some((d, _)) = records.iter().find(|(_, r)| r.is_none()) {
        return Err(CliError::Usage(
            Problem::new(format!(
                "{d} is not from a `gate check --shard` run, but {first_dir} is (shard {})",
                first.shard
            ))
            .with_hint("merge the folders of one split: all from `--shard I/N`, or all from `--only`"),
        ));
    }
    let n = first.shard.count;
    let mut seen = vec![None::<&str>; n];
    for (d, r) in &sharded {
        if r.shard.count != n {
            return Err(CliError::Usage(
                Problem::new(format!(
                    "{d} is shard {} but {first_dir} is shard {}: two different splits",
                    r.shard, first.shard
                ))
                .with_hint("merge the folders of one matrix run, all with the same N"),
            ));
        }
        if let Some(prev) = seen[r.shard.index - 1].replace(d) {
            return Err(CliError::Usage(
                Problem::new(format!("{prev} and {d} are both shard {}", r.shard))
                    .with_hint("give each shard's folder once"),
            ));
        }
    }
    let missing: Vec<String> = (1..=n)
        .filter(|i| seen[i - 1].is_none())
        .map(|i| format!("{i}/{n}"))
        .collect();
    if !missing.is_empty() {
        return Err(CliError::Infrastructure(
            Problem::new(format!(
                "shard {} missing: gate merge judges a sharded run only with all {n} shards",
                missing.join(", ")
            ))
            .with_hint(
                "re-run the shard's job (did it fail before uploading its folder?), then merge every shard's folder",
            ),
        ));
    }
    Ok(())
}

/// Refuses shards dealt from different `--only` selections: each holds its
/// share of another set, so some components would be in no shard, others
/// in two (issue #43 item 6).
pub(super) fn check_one_selection(records: &[(String, Option<Record>)]) -> Result<(), CliError> {
    let mut sharded = records.iter().filter_map(|(d, r)| r.as_ref().map(|r| (d, r)));
    let Some((first_dir, first)) = sharded.next() else {
        return Ok(());
    };
    let said = |only: &[String]| match only {
        [] => "without --only".to_string(),
        _ => format!("with --only {}", only.join(",")),
    };
    match sharded.find(|(_, r)| r.only != first.only) {
        Some((d, r)) => Err(CliError::Usage(
            Problem::new(format!(
                "{d} is shard {} of a run {}, but {first_dir} is shard {} of a run {}: two different splits",
                r.shard,
                said(&r.only),
                first.shard,
                said(&first.only)
            ))
            .with_hint("merge the folders of one matrix run, every shard with the same --only (or none)"),
        )),
        None => Ok(()),
    }
}

/// Refuses a shard whose `shard.json` and report disagree: a component it
/// claims that its report lacks (or holds unmeasured) would pass as "not
/// measured", one its report holds unclaimed may be in another shard too
/// (issue #43 item 6).
pub(super) fn check_claims(
    dir: &Path,
    record: &Record,
    report: &gate_contract::report::Report,
) -> Result<(), CliError> {
    let claimed: std::collections::HashSet<&str> = record.components.iter().map(String::as_str).collect();
    let held: std::collections::HashSet<&str> = report
        .components
        .iter()
        .filter(|(_, c)| {
            c.error
                .as_ref()
                .is_none_or(|e| e.kind != gate_contract::report::ErrorKind::NotMeasured)
        })
        .map(|(n, _)| base(n))
        .collect();
    let bad = |what: String| {
        CliError::Usage(
            Problem::new(format!("{}: {what}", dir.join(gate_contract::shard::FILE).display()))
                .with_hint("merge the output folders as `gate check --shard I/N` wrote them (re-run the shard's job)"),
        )
    };
    if let Some(lacking) = record.components.iter().find(|c| !held.contains(c.as_str())) {
        return Err(bad(format!(
            "shard {} claims `{lacking}`, which {} has no measurement of",
            record.shard,
            dir.join("report.json").display()
        )));
    }
    if let Some(extra) = report.components.keys().find(|n| !claimed.contains(base(n))) {
        return Err(bad(format!(
            "shard {} does not claim `{extra}`, which {} holds",
            record.shard,
            dir.join("report.json").display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_and_bad_ones_say_the_form() {
        assert_eq!(parse("2/3").unwrap(), Shard { index: 2, count: 3 });
        assert_eq!(parse(" 1/1 ").unwrap(), Shard { index: 1, count: 1 });
        for bad in ["0/3", "4/3", "1/0", "3", "a/b", "-1/3", "1/3/4", "", "1/257"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_split_deals_sorted_components_and_keeps_variants_with_them() {
        let names = ["tft", "tft@plain", "dqn", "ppo", "mamba2"];
        let of = |i| components(names, Shard { index: i, count: 2 });
        assert_eq!(of(1), ["dqn", "ppo"]);
        assert_eq!(of(2), ["mamba2", "tft"]);
        // Every component in exactly one shard, for any N.
        for n in 1..=7 {
            let mut all: Vec<String> = (1..=n)
                .flat_map(|i| components(names, Shard { index: i, count: n }))
                .collect();
            all.sort();
            assert_eq!(all, ["dqn", "mamba2", "ppo", "tft"]);
        }
        // More shards than components: the last ones are empty.
        assert!(components(names, Shard { index: 5, count: 5 }).is_empty());
    }
}

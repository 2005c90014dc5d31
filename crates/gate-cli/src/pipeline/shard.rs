//! `gate check --shard I/N`: which components shard I of N profiles, and
//! the `shard.json` it leaves beside its report so that `gate merge` can
//! tell a complete set of shards from one with a shard missing.
//!
//! The split: the spec's components (a variant, `NAME@VARIANT`, goes with
//! its component, as its ratio budgets compare it with that component),
//! dealt by cost: each component's profile time in the baseline report (its
//! variants' added, the time a GPU profile waited for its turn left out),
//! longest first (ties by name), each to the shard with the least time so
//! far (ties to the lowest index): the greedy longest-processing-time rule,
//! which keeps the longest shard, the matrix's wall time, within 4/3 of the
//! best split. A component or variant the baseline has no time for (new
//! since) counts at the median of those it has. Costs are whole
//! milliseconds, so sums and ties are exact and every runner given the same
//! baseline deals alike.
//!
//! Without a baseline, or with one that recorded no profile times, every
//! component costs the same: sorted by name and dealt round-robin (the
//! k-th, from 0, to shard k mod N + 1, which is what the rule above does
//! with equal costs). Not a hash of the name: a hash leaves shards empty or
//! doubled when there are few components (3 components over 3 shards would
//! often be 2-1-0). Adding a component may move others to another shard,
//! which costs nothing: every run measures afresh, and `gate merge` needs
//! only that each component is in exactly one shard. `shard.json` records
//! what the deal was based on, so that `gate merge` can tell shards dealt
//! from different baselines.
//!
//! What a shard can judge: its own components' budgets, including their
//! variants' ratio budgets. What it cannot: an ensemble budget whose
//! members lie in other shards; those rows are "not measured" in the
//! shard's report, and `gate merge`, which decides again over every
//! component, judges them as an unsharded run would.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use crate::errors::CliError;
use gate_spec::hint::Problem;

use gate_contract::report::Report;
use gate_contract::shard::{DealtBy, Record, Shard};

/// The most bytes of `shard.json` read (a few numbers and names).
const MAX_BYTES: u64 = 1 << 20;

/// The most shards (a matrix of GitHub Actions has at most 256 jobs).
pub(crate) const MAX_COUNT: usize = 256;

/// Parses `I/N`, with `1 <= I <= N <= 256`.
pub(crate) fn parse(text: &str) -> Result<Shard, CliError> {
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
pub(crate) fn base(name: &str) -> &str {
    gate_spec::name::base_of(name)
}

/// A cost in whole milliseconds: sums and comparisons exact, so that every
/// runner given the same baseline deals alike.
pub(crate) type Millis = u64;

/// What each component of a split costs, and where that came from.
#[derive(Debug, PartialEq)]
pub(crate) struct Costs {
    pub(crate) dealt_by: DealtBy,
    /// Each component (its variants folded in) and its cost; all 1 when
    /// dealt by name.
    pub(crate) of: BTreeMap<String, Millis>,
    /// The names (components or variants) the baseline has no time for,
    /// each counted at `median`.
    pub(crate) estimated: Vec<String>,
    pub(crate) median: Millis,
}

impl Costs {
    /// The costs as `shard.json` records them, in seconds (none when dealt by name).
    pub(crate) fn seconds(&self) -> BTreeMap<String, f64> {
        match self.dealt_by {
            DealtBy::Name => BTreeMap::new(),
            DealtBy::Baseline => self.of.iter().map(|(n, ms)| (n.clone(), seconds(*ms))).collect(),
        }
    }
}

pub(crate) fn seconds(ms: Millis) -> f64 {
    ms as f64 / 1000.0
}

/// A component's (or variant's) profile time in `baseline`, in seconds:
/// the profile's own work, as a GPU profile's wait for its turn depends on
/// what ran beside it, not on the component.
pub(crate) fn profile_time(baseline: Option<&Report>, name: &str) -> Option<f64> {
    let c = baseline?.components.get(name)?;
    Some(c.profile_seconds? - c.turn_wait_seconds.max(0.0))
}

/// The costs of the components of `names` (components and variants): the
/// profile `time` of each, else all equal (dealt by name) when none has one.
pub(crate) fn costs<'a>(names: impl IntoIterator<Item = &'a str>, time: impl Fn(&str) -> Option<f64>) -> Costs {
    let mut names: Vec<&str> = names.into_iter().collect();
    names.sort_unstable();
    names.dedup();
    // A time that is not a number of seconds a profile can take (a
    // hand-edited file: negative, NaN, or past GitHub's longest job, 5 days
    // on a self-hosted runner) is as good as none.
    let measured = |name: &str| -> Option<Millis> {
        let s = time(name)?;
        (s.is_finite() && (0.0..=MAX_PROFILE_SECONDS).contains(&s)).then(|| (s * 1000.0).round() as Millis)
    };
    let mut known: Vec<Millis> = names.iter().filter_map(|n| measured(n)).collect();
    if known.is_empty() {
        return Costs {
            dealt_by: DealtBy::Name,
            of: names.iter().map(|n| (base(n).to_string(), 1)).collect(),
            estimated: Vec::new(),
            median: 1,
        };
    }
    known.sort_unstable();
    let mid = known.len() / 2;
    let median = if known.len() % 2 == 1 {
        known[mid]
    } else {
        ((u128::from(known[mid - 1]) + u128::from(known[mid])) / 2) as Millis
    };
    let mut of = BTreeMap::<String, Millis>::new();
    let mut estimated = Vec::new();
    for n in names {
        let cost = measured(n).unwrap_or_else(|| {
            estimated.push(n.to_string());
            median
        });
        let total = of.entry(base(n).to_string()).or_default();
        *total = total.saturating_add(cost);
    }
    Costs {
        dealt_by: DealtBy::Baseline,
        of,
        estimated,
        median,
    }
}

/// Deals the components over `count` shards, longest first (ties by name),
/// each to the shard with the least cost so far (ties to the lowest
/// index). Shard I's components, sorted, are at index I - 1.
pub(crate) fn deal(costs: &BTreeMap<String, Millis>, count: usize) -> Vec<Vec<String>> {
    let mut order: Vec<(&String, Millis)> = costs.iter().map(|(n, c)| (n, *c)).collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let mut totals: Vec<Millis> = vec![0; count];
    let mut shards: Vec<Vec<String>> = vec![Vec::new(); count];
    for (name, cost) in order {
        let Some(least) = (0..count).min_by_key(|&i| (totals[i], i)) else {
            break;
        };
        totals[least] = totals[least].saturating_add(cost);
        shards[least].push(name.clone());
    }
    shards.iter_mut().for_each(|s| s.sort());
    shards
}

/// Each shard's total cost under `deal` (saturating, as the deal adds).
pub(crate) fn totals(costs: &BTreeMap<String, Millis>, shards: &[Vec<String>]) -> Vec<Millis> {
    shards
        .iter()
        .map(|s| sum(s.iter().map(|n| costs.get(n).copied().unwrap_or(0))))
        .collect()
}

/// The sum of `costs`, saturating: a cost is bounded, a count of them is not.
pub(crate) fn sum(costs: impl IntoIterator<Item = Millis>) -> Millis {
    costs.into_iter().fold(0, Millis::saturating_add)
}

/// The longest profile time a baseline may give: 5 days, the most GitHub
/// Actions lets a job of a self-hosted runner run (its usage limits).
const MAX_PROFILE_SECONDS: f64 = 5.0 * 24.0 * 3600.0;

/// Reads `dir/shard.json`: `None` when there is none (an unsharded run).
pub(crate) fn read(dir: &Path) -> Result<Option<Record>, CliError> {
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
pub(crate) fn check_complete(records: &[(String, Option<Record>)]) -> Result<(), CliError> {
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
pub(crate) fn check_one_selection(records: &[(String, Option<Record>)]) -> Result<(), CliError> {
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

/// Shards dealt from different inputs (another baseline, or none: a store
/// that moved on while the matrix ran, a shard given another `--baseline`)
/// may hold a component twice, or leave one in no shard. Refused when a
/// component fell to two shards; when each is still in one shard at most,
/// merged with a warning (a component in none is refused afterwards, by
/// name, as with any merge).
pub(crate) fn check_one_deal(records: &[(String, Option<Record>)]) -> Result<(), CliError> {
    let sharded: Vec<(&str, &Record)> = records
        .iter()
        .filter_map(|(d, r)| r.as_ref().map(|r| (d.as_str(), r)))
        .collect();
    let Some(&(first_dir, first)) = sharded.first() else {
        return Ok(());
    };
    let Some(&(dir, other)) = sharded.iter().find(|(_, r)| !r.same_deal(first)) else {
        return Ok(());
    };
    let differ = match (first.dealt_by, other.dealt_by) {
        (DealtBy::Baseline, DealtBy::Baseline) => {
            let cost = |r: &Record, n: &str| r.costs.get(n).map_or("no cost".to_string(), |s| format!("{s:.3} s"));
            let name = first
                .costs
                .keys()
                .chain(other.costs.keys())
                .find(|n| first.costs.get(*n) != other.costs.get(*n))
                .map_or("", String::as_str);
            format!(
                "{dir} was dealt with `{name}` at {}, {first_dir} with it at {}",
                cost(other, name),
                cost(first, name)
            )
        }
        _ => {
            let said = |r: &Record| match r.dealt_by {
                DealtBy::Name => "by name (no baseline times)",
                DealtBy::Baseline => "by the baseline's profile times",
            };
            format!("{dir} was dealt {}, {first_dir} {}", said(other), said(first))
        }
    };
    let mut held: HashMap<&str, &str> = HashMap::new();
    let twice = sharded.iter().find_map(|&(d, r)| {
        r.components
            .iter()
            .find_map(|c| held.insert(c.as_str(), d).map(|before| (c, before, d)))
    });
    match twice {
        Some((c, a, b)) => Err(CliError::Usage(
            Problem::new(format!(
                "shards dealt from different inputs: {differ}; `{c}` fell to both {a} and {b}"
            ))
            .with_hint(
                "give every shard of the matrix the same baseline: fetch it once before the matrix \
                     and pass it to each shard as --baseline FILE, then re-run the shards",
            ),
        )),
        None => {
            eprintln!(
                "warning: shards dealt from different inputs: {differ}; no component fell to two shards \
                 (give every shard the same --baseline FILE)"
            );
            Ok(())
        }
    }
}

/// Refuses a shard whose `shard.json` and report disagree: a component it
/// claims that its report lacks (or holds unmeasured) would pass as "not
/// measured", one its report holds unclaimed may be in another shard too
/// (issue #43 item 6).
pub(crate) fn check_claims(
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

/// Whether `--only` selects component `name`; a variant (`NAME@VARIANT`)
/// comes with its component.
pub(crate) fn is_selected(only: &[String], name: &str) -> bool {
    let base = gate_spec::name::base_of(name);
    only.is_empty() || only.iter().any(|o| o == name || o == base)
}
/// The shard's record for shard.json (the components it holds, of those
/// `--only` selects, dealt by their profile times in `baseline`), and the
/// costs they were dealt by.
pub(crate) fn shard_components(
    spec: &gate_spec::budget::Spec,
    only: &[String],
    shard: gate_contract::shard::Shard,
    baseline: Option<&Report>,
) -> (gate_contract::shard::Record, crate::pipeline::shard::Costs) {
    let names = spec
        .components
        .iter()
        .map(|c| c.name.as_str())
        .filter(|n| is_selected(only, n));
    let costs = crate::pipeline::shard::costs(names, |n| crate::pipeline::shard::profile_time(baseline, n));
    let held = crate::pipeline::shard::deal(&costs.of, shard.count).swap_remove(shard.index - 1);
    let record = gate_contract::shard::Record {
        shard,
        components: held,
        only: {
            let mut only = only.to_vec();
            only.sort();
            only.dedup();
            only
        },
        dealt_by: costs.dealt_by,
        costs: costs.seconds(),
    };
    (record, costs)
}
/// Says what the shard holds and what it was dealt by, and what it cannot
/// judge: an ensemble whose members lie partly in other shards (judged by
/// `gate merge`).
pub(crate) fn log_shard(
    spec: &gate_spec::budget::Spec,
    record: &gate_contract::shard::Record,
    costs: &crate::pipeline::shard::Costs,
    with_baseline: bool,
) {
    use crate::pipeline::shard::seconds;
    let s = record.shard;
    if record.components.is_empty() {
        eprintln!("shard {s}: no component falls to this shard (fewer components than shards): it measures nothing");
    } else {
        eprintln!("shard {s}: {}", record.components.join(", "));
    }
    match record.dealt_by {
        gate_contract::shard::DealtBy::Baseline => {
            let totals = crate::pipeline::shard::totals(&costs.of, &crate::pipeline::shard::deal(&costs.of, s.count));
            let longest = totals.iter().copied().max().unwrap_or(0);
            eprintln!(
                "shard {s}: dealt by the baseline's profile times: {:.1} s here, {:.1} s the longest shard, {:.1} s in all",
                seconds(totals[s.index - 1]),
                seconds(longest),
                seconds(crate::pipeline::shard::sum(totals.iter().copied()))
            );
            if !costs.estimated.is_empty() {
                eprintln!(
                    "note: shard {s}: the baseline has no profile time for {}: each counted at the median, {:.1} s",
                    costs.estimated.join(", "),
                    seconds(costs.median)
                );
            }
        }
        gate_contract::shard::DealtBy::Name if s.count > 1 => eprintln!(
            "shard {s}: dealt by name, round-robin ({}): pass every shard the same baseline to deal by profile time",
            if with_baseline {
                "the baseline records no profile time for these components"
            } else {
                "no baseline"
            }
        ),
        gate_contract::shard::DealtBy::Name => {}
    }
    if let Some(e) = &spec.ensemble {
        let elsewhere: Vec<&str> = e
            .members
            .iter()
            .map(|m| crate::pipeline::shard::base(m))
            .filter(|m| !record.components.iter().any(|c| c == m))
            .collect();
        if !elsewhere.is_empty() {
            eprintln!(
                "note: shard {s}: the ensemble's members {} are in other shards: its budgets are not measured here \
                 (a warning, a failure under --strict) and are judged by `gate merge` of all {} shards",
                elsewhere.join(", "),
                s.count
            );
        }
    }
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

    /// Shard I of N's components (index I - 1) under `times` (seconds by
    /// name; a name absent has none).
    fn dealt(names: &[&str], times: &[(&str, f64)], count: usize) -> Vec<Vec<String>> {
        let costs = costs(names.iter().copied(), |n| {
            times.iter().find(|(t, _)| *t == n).map(|(_, s)| *s)
        });
        deal(&costs.of, count)
    }

    #[test]
    fn without_times_the_split_deals_sorted_components_round_robin_and_keeps_variants_with_them() {
        let names = ["tft", "tft@plain", "dqn", "ppo", "mamba2"];
        assert_eq!(dealt(&names, &[], 2), [vec!["dqn", "ppo"], vec!["mamba2", "tft"]]);
        assert_eq!(costs(names, |_| None).dealt_by, DealtBy::Name);
        // Every component in exactly one shard, for any N.
        for n in 1..=7 {
            let mut all: Vec<String> = dealt(&names, &[], n).into_iter().flatten().collect();
            all.sort();
            assert_eq!(all, ["dqn", "mamba2", "ppo", "tft"]);
        }
        // More shards than components: the last ones are empty.
        assert!(dealt(&names, &[], 5)[4].is_empty());
    }

    #[test]
    fn with_times_the_longest_go_first_each_to_the_least_loaded_shard() {
        // Round-robin by name would give a: 30 + 10 + 5 = 45 and b: 25 against
        // an even 35 each; longest first: a (30) then c, d, e (10 each) to the
        // other, then f and b (5 each) one to each.
        let names = ["a", "b", "c", "d", "e", "f"];
        let times = [
            ("a", 30.0),
            ("b", 5.0),
            ("c", 10.0),
            ("d", 10.0),
            ("e", 10.0),
            ("f", 5.0),
        ];
        let shards = dealt(&names, &times, 2);
        assert_eq!(shards, [vec!["a", "b"], vec!["c", "d", "e", "f"]]);
        let c = costs(names, |n| times.iter().find(|(t, _)| *t == n).map(|(_, s)| *s));
        assert_eq!(c.dealt_by, DealtBy::Baseline);
        assert_eq!(totals(&c.of, &shards), [35_000, 35_000]);
        // Ties: by name among equal costs, to the lowest shard among equal totals.
        assert_eq!(
            dealt(&["x", "y", "z"], &[("x", 1.0), ("y", 1.0), ("z", 1.0)], 2),
            [vec!["x", "z"], vec!["y"]]
        );
    }

    #[test]
    fn a_variant_counts_with_its_component() {
        // tft + tft@plain = 40 s against 30 s alone: tft has a shard to itself.
        let names = ["tft", "tft@plain", "ppo", "dqn"];
        let times = [("tft", 20.0), ("tft@plain", 20.0), ("ppo", 20.0), ("dqn", 10.0)];
        assert_eq!(dealt(&names, &times, 2), [vec!["tft"], vec!["dqn", "ppo"]]);
        let c = costs(names, |n| times.iter().find(|(t, _)| *t == n).map(|(_, s)| *s));
        assert_eq!(c.of["tft"], 40_000);
        assert_eq!(
            c.seconds(),
            BTreeMap::from([("dqn".into(), 10.0), ("ppo".into(), 20.0), ("tft".into(), 40.0)])
        );
    }

    #[test]
    fn a_component_new_since_the_baseline_counts_at_the_median() {
        let names = ["a", "b", "c", "new", "new@v"];
        let times = [("a", 3.0), ("b", 9.0), ("c", 4.0)];
        let c = costs(names, |n| times.iter().find(|(t, _)| *t == n).map(|(_, s)| *s));
        assert_eq!(c.median, 4_000);
        assert_eq!(c.estimated, ["new", "new@v"]);
        assert_eq!(c.of["new"], 8_000);
        // An even count: the mean of the middle two; a time that is no
        // number of seconds is none.
        let c = costs(["a", "b", "n"], |n| match n {
            "a" => Some(1.0),
            "b" => Some(2.0),
            _ => Some(f64::NAN),
        });
        assert_eq!((c.median, c.estimated), (1_500, vec!["n".to_string()]));
    }

    #[test]
    fn a_matrix_finishes_within_a_fifth_of_an_even_split_when_the_components_allow_it() {
        let cases: [(&[f64], usize); 5] = [
            (&[30.0, 10.0, 10.0, 10.0, 5.0, 5.0], 2),
            (&[32.0, 8.0, 7.5, 6.0, 5.0, 4.0, 3.0, 3.0, 2.0, 2.0, 1.0, 1.0, 1.0], 2),
            (&[20.0, 19.0, 18.0, 9.0, 9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0], 3),
            (&[12.0, 11.0, 10.0, 9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0], 4),
            (&[5.0; 12], 4),
        ];
        for (times, n) in cases {
            let names: Vec<String> = (0..times.len()).map(|i| format!("c{i:02}")).collect();
            let c = costs(names.iter().map(String::as_str), |name| {
                Some(times[name[1..].parse::<usize>().unwrap()])
            });
            let shards = deal(&c.of, n);
            let longest = *totals(&c.of, &shards).iter().max().unwrap();
            let even = c.of.values().sum::<Millis>() as f64 / n as f64;
            assert!(
                longest as f64 <= 1.2 * even,
                "{times:?} over {n}: {longest} ms, even {even} ms"
            );
            let mut all: Vec<String> = shards.into_iter().flatten().collect();
            all.sort();
            assert_eq!(all, names);
        }
        // Round-robin by name, the first case's shard 1 takes 30 + 10 + 5
        // against an even 35: more than a fifth over.
        let rr = dealt(&["c0", "c1", "c2", "c3", "c4", "c5"], &[], 2);
        let first: Millis = [30_000, 10_000, 5_000].iter().sum();
        assert_eq!(rr[0], ["c0", "c2", "c4"]);
        assert!(first as f64 > 1.2 * 35_000.0);
    }

    #[test]
    fn shards_dealt_alike_merge_dealt_apart_only_when_no_component_fell_twice() {
        let record = |i: usize, components: &[&str], cost_a: f64| {
            Some(Record {
                shard: Shard { index: i, count: 2 },
                components: components.iter().map(|c| c.to_string()).collect(),
                only: Vec::new(),
                dealt_by: DealtBy::Baseline,
                costs: BTreeMap::from([("a".into(), cost_a), ("b".into(), 1.0)]),
            })
        };
        let same = [
            ("s1".into(), record(1, &["a"], 9.0)),
            ("s2".into(), record(2, &["b"], 9.0)),
        ];
        assert!(check_one_deal(&same).is_ok());
        let apart = [
            ("s1".into(), record(1, &["a"], 9.0)),
            ("s2".into(), record(2, &["b"], 0.5)),
        ];
        assert!(check_one_deal(&apart).is_ok(), "each in one shard: a warning");
        let twice = [
            ("s1".into(), record(1, &["a"], 9.0)),
            ("s2".into(), record(2, &["a", "b"], 0.5)),
        ];
        let CliError::Usage(p) = check_one_deal(&twice).unwrap_err() else {
            panic!("bad input")
        };
        let said = p.to_string();
        assert!(
            said.contains("s2 was dealt with `a` at 0.500 s, s1 with it at 9.000 s; `a` fell to both s1 and s2"),
            "{said}"
        );
    }
}

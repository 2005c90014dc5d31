//! The history section: each failing, regressed or acknowledged budget over
//! the stored reports of the target branch, with the budget of each day, so
//! slow drift is seen. Folded, one table per budget.

use std::fmt::Write;

use super::escape;
use super::escape::code;
use gate_contract::history::{Point, Series};
use gate_spec::metric::{format_in, format_limit, Unit};

pub(super) fn section(series: &[Series]) -> String {
    if series.is_empty() {
        return String::new();
    }
    let mut out = String::from("#### History on the target branch\n\n");
    for s in series {
        let name = code(&format!("{}.{}", s.component, s.metric));
        let value = |p: &Point| {
            p.value
                .map_or_else(|| "—".to_string(), |v| format_in(s.unit, s.display_unit, v))
        };
        let (first, last) = (&s.points[0], &s.points[s.points.len() - 1]);
        let stored = s.points.len() - 1;
        let _ = writeln!(
            out,
            "<details><summary>{name}: {} → {} over {stored} stored report{}</summary>\n",
            value(first),
            value(last),
            if stored == 1 { "" } else { "s" }
        );
        out.push_str("| commit | value | budget | % of budget |\n|---|--:|--:|--:|\n");
        for p in &s.points {
            let commit = p.commit.as_deref().map_or_else(
                || "this PR".to_string(),
                |c| code(&c.chars().take(10).collect::<String>()),
            );
            let used = match (p.value, s.unit) {
                (Some(v), Unit::Bytes | Unit::Ms) if p.op.is_max() && p.limit > 0.0 => {
                    format!("{:.1}%", v / p.limit * 100.0)
                }
                _ => "—".into(),
            };
            let _ = writeln!(
                out,
                "| {commit} | {} | {} | {used} |",
                value(p),
                escape(&if s.unit == Unit::Ms && s.limit_in_seconds {
                    gate_spec::metric::format_limit_in_seconds(p.op.symbol(), p.limit)
                } else {
                    format_limit(s.unit, s.display_unit, p.op.symbol(), p.limit)
                })
            );
        }
        out.push_str("\n</details>\n\n");
    }
    out
}

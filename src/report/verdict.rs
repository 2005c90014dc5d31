//! The verdict: spec + measurements (+ baseline) → one result per budget.
//! A pure function: no I/O, no printing, no exit codes.

use std::collections::BTreeMap;

use crate::budget::{Limit, Spec};
use crate::metric::{Metric, Unit};

use super::model::*;

/// How far the measured `params` may sit above the closed form before the
/// two are said to disagree: tensor metadata (shapes, names, reference
/// counts) is counted by the CPU allocator, a few hundred bytes per tensor.
pub const PARAMS_AGREEMENT: f64 = 0.01;
pub const PARAMS_AGREEMENT_FLOOR: u64 = 64 * 1024;

/// The context reserve used for the ensemble and where it came from.
#[derive(Debug, Clone, Copy)]
pub struct Reserve {
    pub bytes: u64,
    pub measured: bool,
}

pub struct Verdict {
    pub results: Vec<BudgetResult>,
    pub ensemble: Option<EnsembleReport>,
    pub summary: Summary,
}

fn judge(limit: &Limit, measured: f64) -> Status {
    if limit.op.holds(measured, limit.value) {
        Status::Pass
    } else {
        Status::Fail
    }
}

/// Whether `measured` moved the wrong way past `baseline` by more than
/// `tolerance` percent. Only sizes are held to it: wall time on shared
/// runners varies more than any useful tolerance, so `step_time` and `loss`
/// are shown against the baseline but gated only by their budgets.
fn regressed(measured: f64, baseline: f64, tolerance: f64, lower_is_better: bool) -> bool {
    if lower_is_better {
        measured > baseline * (1.0 + tolerance / 100.0) && measured - baseline > 0.0
    } else {
        measured < baseline * (1.0 - tolerance / 100.0)
    }
}

pub fn decide(
    spec: &Spec,
    components: &BTreeMap<String, ComponentReport>,
    baseline: Option<&Report>,
    baseline_comparable: bool,
    reserve: Reserve,
    strict: bool,
) -> Verdict {
    let mut results = Vec::new();
    let mut warnings = Vec::new();
    for c in &spec.components {
        let Some(report) = components.get(&c.name) else {
            continue;
        };
        let base = baseline
            .filter(|_| baseline_comparable)
            .and_then(|b| b.components.get(&c.name))
            .filter(|b| b.fingerprint == report.fingerprint);
        if let Some(ComponentError {
            kind: ErrorKind::NotMeasured,
            reason,
            ..
        }) = &report.error
        {
            warnings.push(format!("{}: not measured: {reason}", c.name));
        }
        if let (Some(p), true) = (report.value(Metric::Params), report.analytic_params_bytes > 0) {
            let a = report.analytic_params_bytes as f64;
            let allowed = (a * PARAMS_AGREEMENT).max(PARAMS_AGREEMENT_FLOOR as f64);
            if (p - a).abs() > allowed {
                warnings.push(format!(
                    "{}: measured params ({}) and the closed form ({}) disagree",
                    c.name,
                    crate::units::Bytes(p as u64),
                    crate::units::Bytes(a as u64)
                ));
            }
        }
        for b in &c.budgets {
            let measured = report.value(b.metric);
            let base_value = base.and_then(|r| r.value(b.metric));
            let (status, reason) = match (measured, &report.error) {
                (Some(v), _) => {
                    let s = judge(&b.limit, v);
                    match base_value {
                        Some(bv)
                            if s == Status::Pass
                                && b.metric.unit() == Unit::Bytes
                                && b.metric.lower_is_better() == b.limit.op.is_max()
                                && regressed(v, bv, c.tolerance.0, b.metric.lower_is_better()) =>
                        {
                            (
                                Status::Regressed,
                                Some(format!("grew more than {} over the baseline", c.tolerance)),
                            )
                        }
                        _ => (s, None),
                    }
                }
                (
                    None,
                    Some(ComponentError {
                        kind: ErrorKind::NotMeasured,
                        reason,
                        ..
                    }),
                ) => (Status::NotMeasured, Some(reason.clone())),
                (
                    None,
                    Some(ComponentError {
                        kind: ErrorKind::Failed,
                        phase,
                        reason,
                    }),
                ) => (
                    Status::Fail,
                    Some(format!(
                        "measurement failed in phase {}: {reason}",
                        phase.as_deref().unwrap_or("unknown")
                    )),
                ),
                (None, None) => (Status::NotMeasured, Some(not_measured_reason(b.metric))),
            };
            if status == Status::NotMeasured && report.error.is_none() {
                warnings.push(format!(
                    "{}.{}: {}",
                    c.name,
                    b.metric,
                    reason.clone().unwrap_or_default()
                ));
            }
            results.push(BudgetResult {
                component: c.name.clone(),
                metric: b.metric.name().to_string(),
                unit: b.metric.unit(),
                op: b.limit.op.symbol().to_string(),
                limit: b.limit.value,
                measured,
                baseline: base_value,
                tolerance_percent: c.tolerance.0,
                status,
                line: b.line,
                reason,
            });
        }
    }

    let ensemble = spec.ensemble.as_ref().map(|e| {
        let mut sum = 0u64;
        let mut missing = Vec::new();
        for m in &e.members {
            match components.get(m).and_then(|r| r.value(e.metric)) {
                Some(v) => sum += v as u64,
                None => missing.push(m.clone()),
            }
        }
        let total = missing.is_empty().then_some(sum + reserve.bytes * e.processes);
        let capacity = spec.device.capacity.0;
        let report = EnsembleReport {
            members: e.members.clone(),
            metric: e.metric,
            total_bytes: total,
            headroom_bytes: total.map(|t| capacity as i64 - t as i64),
            reserve_bytes: reserve.bytes * e.processes,
            reserve_source: if reserve.measured {
                "measured".into()
            } else {
                "declared".into()
            },
            processes: e.processes,
            capacity_bytes: capacity,
            missing: missing.clone(),
        };
        let base_ens = baseline
            .filter(|_| baseline_comparable)
            .and_then(|b| b.ensemble.as_ref());
        for b in &e.budgets {
            let (measured, base_value) = match b.metric {
                crate::budget::EnsembleMetric::Total => (
                    report.total_bytes.map(|v| v as f64),
                    base_ens.and_then(|x| x.total_bytes).map(|v| v as f64),
                ),
                crate::budget::EnsembleMetric::Headroom => (
                    report.headroom_bytes.map(|v| v as f64),
                    base_ens.and_then(|x| x.headroom_bytes).map(|v| v as f64),
                ),
            };
            // Total grows when memory grows; headroom shrinks.
            let lower_is_better = b.metric == crate::budget::EnsembleMetric::Total;
            let (status, reason) = match measured {
                Some(v) => match (judge(&b.limit, v), base_value) {
                    (Status::Pass, Some(bv)) if regressed(v, bv, spec.default_tolerance.0, lower_is_better) => (
                        Status::Regressed,
                        Some(format!(
                            "moved more than {} the wrong way over the baseline",
                            spec.default_tolerance
                        )),
                    ),
                    (s, _) => (s, None),
                },
                None => {
                    let failed: Vec<&String> = missing
                        .iter()
                        .filter(|m| {
                            components.get(*m).is_some_and(|r| {
                                matches!(
                                    r.error,
                                    Some(ComponentError {
                                        kind: ErrorKind::Failed,
                                        ..
                                    })
                                )
                            })
                        })
                        .collect();
                    if failed.is_empty() {
                        (
                            Status::NotMeasured,
                            Some(format!("no {} for: {}", e.metric, missing.join(", "))),
                        )
                    } else {
                        (
                            Status::Fail,
                            Some(format!(
                                "the measurement of {} failed",
                                failed.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                            )),
                        )
                    }
                }
            };
            if status == Status::NotMeasured {
                warnings.push(format!(
                    "ensemble.{}: {}",
                    b.metric.name(),
                    reason.clone().unwrap_or_default()
                ));
            }
            results.push(BudgetResult {
                component: "ensemble".into(),
                metric: b.metric.name().into(),
                unit: Unit::Bytes,
                op: b.limit.op.symbol().into(),
                limit: b.limit.value,
                measured,
                baseline: base_value,
                tolerance_percent: spec.default_tolerance.0,
                status,
                line: b.line,
                reason,
            });
        }
        report
    });

    let count = |s: Status| results.iter().filter(|r| r.status == s).count();
    let (passed, failed, regressed_n, not_measured) = (
        count(Status::Pass),
        count(Status::Fail),
        count(Status::Regressed),
        count(Status::NotMeasured),
    );
    let failing = failed + regressed_n > 0 || (strict && (!warnings.is_empty() || not_measured > 0));
    Verdict {
        summary: Summary {
            status: if failing { "fail".into() } else { "pass".into() },
            passed,
            failed,
            regressed: regressed_n,
            not_measured,
            warnings,
            strict,
        },
        results,
        ensemble,
    }
}

fn not_measured_reason(metric: Metric) -> String {
    match metric {
        Metric::DeviceUsed => "device_used is measured on CUDA runs only".into(),
        m => format!("{m} was not measured"),
    }
}

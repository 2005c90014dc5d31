//! The workload kinds a harness knows and a spec's components resolved
//! against them, for any framework: a kind is a name and a reader of its
//! `config:`; a framework adapter registers its own workload type `D` (a
//! trait object of its own workload trait, say). Problems are spec errors
//! with their positions, like any other (exit 2): an unknown kind, a wrong
//! config value, a checkpoint the workload cannot take.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use gate_spec::budget::{Component, Diagnostic, Diagnostics, Spec, WorkloadCheck};
use gate_spec::config::{self, ConfigIssue, Node, Pos, Problems};

/// What the resolve step asks of a built workload, whatever its framework.
pub trait Resolvable: fmt::Debug + Send + Sync {
    /// The resolved config as JSON (recorded in the report).
    fn config(&self) -> serde_json::Value;
    /// The workload with its position-wise block checkpointed in chunks of
    /// `chunk` (`checkpoint:`); `None`: it has no such block.
    fn checkpointed(&self, _chunk: usize) -> Option<Arc<Self>> {
        None
    }
    /// The levers `gate plan` may turn for this workload (beyond the
    /// batch, which every workload has): the default, none.
    fn levers(&self) -> Vec<gate_contract::plan::Lever> {
        Vec::new()
    }
    /// The most rows its generation loop decodes at once (`generate:` runs
    /// the component's `batch_size` rows); `None`: any batch.
    fn generation_rows(&self) -> Option<usize> {
        None
    }
    /// The dtypes its adapter builds a model in (the spec's `dtype:`);
    /// `None`: every dtype the spec accepts. Another is refused when the
    /// spec is resolved (`gate validate --build`), not at run time.
    fn dtypes(&self) -> Option<&'static [gate_spec::dtype::DType]> {
        None
    }
}

/// Reads one kind's `config:`.
pub type Reader<D> = fn(&Node) -> Result<Arc<D>, Vec<ConfigIssue>>;

struct Kind<D: ?Sized> {
    name: &'static str,
    read: Reader<D>,
}

// Derived Clone would ask `D: Clone`; a kind is two plain values.
impl<D: ?Sized> Clone for Kind<D> {
    fn clone(&self) -> Self {
        Kind {
            name: self.name,
            read: self.read,
        }
    }
}

/// Kinds by name, in registration order.
pub struct Registry<D: ?Sized> {
    kinds: Vec<Kind<D>>,
}

impl<D: ?Sized> Default for Registry<D> {
    fn default() -> Self {
        Registry { kinds: Vec::new() }
    }
}

impl<D: ?Sized> Clone for Registry<D> {
    fn clone(&self) -> Self {
        Registry {
            kinds: self.kinds.clone(),
        }
    }
}

impl<D: ?Sized> fmt::Debug for Registry<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl<D: ?Sized> Registry<D> {
    /// Adds kind `name` read by `read`; a second kind of the same name, or
    /// a name that is not plain, is refused.
    pub fn add(&mut self, name: &'static str, read: Reader<D>) -> Result<(), String> {
        if self.knows(name) {
            return Err(format!("two workloads are registered as `{name}`"));
        }
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!(
                "workload kind `{name}` is not a plain name (letters, digits, `_`)"
            ));
        }
        self.kinds.push(Kind { name, read });
        Ok(())
    }

    /// Whether `kind` is registered.
    pub fn knows(&self, kind: &str) -> bool {
        self.kinds.iter().any(|k| k.name == kind)
    }

    /// Every registered kind, in registration order.
    pub fn names(&self) -> Vec<&'static str> {
        self.kinds.iter().map(|k| k.name).collect()
    }

    /// Reads `config` as a `kind` workload; `None` when no such kind is registered.
    pub fn read(&self, kind: &str, config: &Node) -> Option<Result<Arc<D>, Vec<ConfigIssue>>> {
        self.kinds.iter().find(|k| k.name == kind).map(|k| (k.read)(config))
    }
}

/// Reads `node` into the typed config `C` (its `Default` fills the keys the
/// spec leaves out) and checks it with `check`; each problem carries the
/// position of its key.
pub fn read_config<C, T>(node: &Node, check: impl FnOnce(C) -> Result<T, Problems>) -> Result<T, Vec<ConfigIssue>>
where
    C: serde::Serialize + serde::de::DeserializeOwned + Default,
{
    let defaults = serde_json::to_value(C::default()).ok();
    let cfg: C = config::read(node, defaults.as_ref())?;
    check(cfg).map_err(|problems| {
        problems
            .into_issues()
            .into_iter()
            .map(|mut i| {
                i.pos = i.key.as_deref().and_then(|k| node.key_pos(k)).or(Some(node.pos));
                i
            })
            .collect()
    })
}

/// The spec's components as built workloads, by component name.
#[derive(Debug)]
pub struct Workloads<D: ?Sized> {
    by_name: BTreeMap<String, Arc<D>>,
}

impl<D: ?Sized> Default for Workloads<D> {
    fn default() -> Self {
        Workloads {
            by_name: BTreeMap::new(),
        }
    }
}

impl<D: ?Sized> Clone for Workloads<D> {
    fn clone(&self) -> Self {
        Workloads {
            by_name: self.by_name.clone(),
        }
    }
}

impl<D: ?Sized> Workloads<D> {
    /// The workload of component `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<D>> {
        self.by_name.get(name)
    }
}

/// Checks workloads against a registry while a spec is validated.
pub struct Checker<'r, D: ?Sized>(pub &'r Registry<D>);

impl<D: ?Sized + Resolvable> WorkloadCheck for Checker<'_, D> {
    fn check(&self, c: &Component, has_harness: bool) -> Vec<Problem> {
        // A kind this binary does not know may be the harness's own: the
        // harness judges it (`resolve` still reports it in the harness).
        if has_harness && !self.0.knows(&c.kind) {
            return Vec::new();
        }
        resolve_one(c, self.0, has_harness).err().unwrap_or_default()
    }
}

/// The workloads of a spec validated elsewhere (the installed `gate` sends
/// it to a harness): checked against `registry` with the same diagnostics
/// as the installed `gate`'s own validation gives, then built.
pub fn workloads_of<D: ?Sized + Resolvable>(spec: &Spec, registry: &Registry<D>) -> Result<Workloads<D>, Diagnostics> {
    gate_spec::budget::check_workloads(spec, &Checker(registry))?;
    resolve(spec, registry)
}

/// Builds every component's workload of a validated `spec`.
pub fn resolve<D: ?Sized + Resolvable>(spec: &Spec, registry: &Registry<D>) -> Result<Workloads<D>, Diagnostics> {
    let mut out = Workloads::default();
    let mut diags = Vec::new();
    for c in &spec.components {
        match resolve_one(c, registry, spec.harness.is_some()) {
            Ok(w) => {
                out.by_name.insert(c.name.clone(), w);
            }
            Err(errs) => diags.extend(errs.into_iter().map(|(pos, message, hint)| Diagnostic {
                file: spec.path.display().to_string(),
                pos,
                message,
                hint,
            })),
        }
    }
    if diags.is_empty() {
        Ok(out)
    } else {
        Err(Diagnostics::all(diags))
    }
}

type Problem = (Pos, String, String);

/// `1 row`, `2 rows`.
fn rows_text(n: usize) -> String {
    if n == 1 {
        "1 row".into()
    } else {
        format!("{n} rows")
    }
}

/// A kind the registry does not know, with the kinds it knows and where a
/// workload of the team's own gets registered.
fn unknown_kind(c: &Component, known: &[&str], has_harness: bool) -> Problem {
    let mut hint = gate_spec::hint::suggest(&c.kind, known, "known workloads");
    if has_harness {
        hint.push_str("; a workload of your crate is registered in its harness's `gate::main!(...)` line");
    } else {
        hint.push_str(
            "; a model of your own crate is measured by its harness: add `harness: { package: NAME, bin: NAME }` \
             to the spec (docs/sdk.md)",
        );
    }
    (c.kind_pos, format!("unknown workload `{}`", c.kind), hint)
}

fn resolve_one<D: ?Sized + Resolvable>(
    c: &Component,
    registry: &Registry<D>,
    has_harness: bool,
) -> Result<Arc<D>, Vec<Problem>> {
    let Some(read) = registry.read(&c.kind, &c.config) else {
        return Err(vec![unknown_kind(c, &registry.names(), has_harness)]);
    };
    let whose = if gate_spec::name::is_variant(&c.name) {
        format!("variant `{}`", c.name)
    } else {
        format!("component `{}`", c.name)
    };
    let workload = read.map_err(|issues| {
        issues
            .into_iter()
            .map(|i| {
                (
                    i.pos.unwrap_or(c.config.pos),
                    format!("{} ({whose})", i.message),
                    i.hint,
                )
            })
            .collect::<Vec<_>>()
    })?;
    if let Some(rows) = workload
        .generation_rows()
        .filter(|&r| c.generate.is_some() && c.batch_size > r)
    {
        return Err(vec![(
            c.generate_pos,
            format!(
                "workload `{}` of `{}` decodes {} at a time, and `batch_size` is {}: its cache would be \
                 measured for {} and reported for {}",
                c.kind,
                c.name,
                rows_text(rows),
                c.batch_size,
                rows_text(rows),
                rows_text(c.batch_size)
            ),
            format!(
                "set `batch_size: {rows}` on the generating component, or make its generation loop decode \
                 `batch_size` rows (docs/sdk.md, \"Generation\")"
            ),
        )]);
    }
    if let Some(dtypes) = workload.dtypes().filter(|d| !d.contains(&c.dtype)) {
        let names: Vec<&str> = dtypes.iter().map(|d| d.as_str()).collect();
        return Err(vec![(
            c.kind_pos,
            format!(
                "workload `{}` of `{}` is built in {} only, and the component asks for `dtype: {}`: \
                 its adapter cannot run it",
                c.kind,
                c.name,
                names.join(" or "),
                c.dtype.as_str()
            ),
            format!(
                "remove `dtype:` from `{}` (and from `defaults:` if it comes from there), or set `dtype: {}`",
                c.name, names[0]
            ),
        )]);
    }
    let Some(chunk) = c.checkpoint else {
        return Ok(workload);
    };
    workload.checkpointed(chunk).ok_or_else(|| {
        vec![(
            c.checkpoint_pos,
            format!("workload `{}` of `{}` has no position-wise block to checkpoint", c.kind, c.name),
            "remove `checkpoint:`; it applies to workloads with a position-wise block (tft: the encoder variable selection)"
                .to_string(),
        )]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A workload whose generation loop decodes one row.
    #[derive(Debug)]
    struct OneRow;

    impl Resolvable for OneRow {
        fn config(&self) -> serde_json::Value {
            serde_json::Value::Null
        }
        fn generation_rows(&self) -> Option<usize> {
            Some(1)
        }
    }

    fn resolved(batch_size: usize) -> Result<Workloads<OneRow>, Diagnostics> {
        let text = format!(
            "version: 1\ndevice: {{ name: card, capacity: 4 GiB, reserve: 300 MiB }}\ncomponents:\n  lm:\n    \
             workload: one\n    batch_size: {batch_size}\n    generate: {{ prefill: 4, decode: 4 }}\n    \
             budgets: {{ kv_cache_per_token: < 1 KiB }}\n"
        );
        let spec = gate_spec::budget::parse(std::path::Path::new("budgets.yaml"), &text).expect("the spec parses");
        let mut registry = Registry::<OneRow>::default();
        registry.add("one", |_| Ok(Arc::new(OneRow))).unwrap();
        resolve(&spec, &registry)
    }

    #[test]
    fn a_generation_of_more_rows_than_the_loop_decodes_is_refused_at_generate_with_why() {
        assert!(resolved(1).is_ok());
        let diags = resolved(2).expect_err("two rows on a one-row loop");
        let d = &diags.0[0];
        assert_eq!((d.pos.line, d.pos.col), (7, 5));
        assert_eq!(
            d.message,
            "workload `one` of `lm` decodes 1 row at a time, and `batch_size` is 2: its cache would be measured \
             for 1 row and reported for 2 rows"
        );
        assert!(
            d.hint.starts_with("set `batch_size: 1` on the generating component"),
            "{}",
            d.hint
        );
    }

    /// A workload whose adapter builds in f32 only.
    #[derive(Debug)]
    struct F32Only;

    impl Resolvable for F32Only {
        fn config(&self) -> serde_json::Value {
            serde_json::Value::Null
        }
        fn dtypes(&self) -> Option<&'static [gate_spec::dtype::DType]> {
            Some(&[gate_spec::dtype::DType::F32])
        }
    }

    #[test]
    fn a_dtype_the_adapter_cannot_build_is_refused_at_resolve_with_what_to_do() {
        let resolve_with = |dtype: &str| {
            let text = format!(
                "version: 1\ndevice: {{ name: card, capacity: 4 GiB, reserve: 300 MiB }}\ncomponents:\n  cnn:\n    \
                 workload: f32only\n    batch_size: 2\n{dtype}    budgets: {{ params: < 1 MiB }}\n"
            );
            let spec = gate_spec::budget::parse(std::path::Path::new("budgets.yaml"), &text).expect("the spec parses");
            let mut registry = Registry::<F32Only>::default();
            registry.add("f32only", |_| Ok(Arc::new(F32Only))).unwrap();
            resolve(&spec, &registry)
        };
        assert!(resolve_with("").is_ok(), "f32, the default");
        assert!(resolve_with("    dtype: f32\n").is_ok());
        let diags = resolve_with("    dtype: bf16\n").expect_err("bf16 on an f32-only adapter");
        let d = &diags.0[0];
        assert_eq!((d.pos.line, d.pos.col), (5, 15), "at `workload:`'s value");
        assert_eq!(
            d.message,
            "workload `f32only` of `cnn` is built in f32 only, and the component asks for `dtype: bf16`: its \
             adapter cannot run it"
        );
        assert_eq!(
            d.hint,
            "remove `dtype:` from `cnn` (and from `defaults:` if it comes from there), or set `dtype: f32`"
        );
    }
}

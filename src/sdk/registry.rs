//! The workload kinds a `gate` binary knows: the built-ins and whatever a
//! harness registers, each read from its spec config the same way. The
//! runner sees a workload only as [`DynWorkload`], the object-safe face of
//! [`Workload`].

use std::fmt;
use std::sync::Arc;

use candle_core::Result;
use candle_nn::VarBuilder;

use super::config::{self, ConfigIssue, Node};
use super::workload::{Batch, Model, ParamCount, RunCtx, Workload};

/// A built workload as the runner uses it.
pub trait DynWorkload: fmt::Debug + Send + Sync {
    /// The `workload:` kind.
    fn kind(&self) -> &'static str;
    /// The resolved config as JSON (recorded in the report).
    fn config(&self) -> serde_json::Value;
    /// See [`Workload::param_count`].
    fn param_count(&self) -> ParamCount;
    /// See [`Workload::build`].
    fn build(&self, vb: VarBuilder, ctx: &RunCtx) -> Result<Box<dyn Model>>;
    /// See [`Workload::batch`].
    fn batch(&self, ctx: &RunCtx, seed: u64) -> Result<Batch>;
    /// See [`Workload::learning_rate`].
    fn learning_rate(&self) -> f64;
    /// See [`Workload::checkpointed`].
    fn checkpointed(&self, chunk: usize) -> Option<Arc<dyn DynWorkload>>;
}

impl<W: Workload> DynWorkload for W {
    fn kind(&self) -> &'static str {
        W::KIND
    }

    fn config(&self) -> serde_json::Value {
        Workload::describe(self)
    }

    fn param_count(&self) -> ParamCount {
        Workload::param_count(self)
    }

    fn build(&self, vb: VarBuilder, ctx: &RunCtx) -> Result<Box<dyn Model>> {
        Workload::build(self, vb, ctx)
    }

    fn batch(&self, ctx: &RunCtx, seed: u64) -> Result<Batch> {
        Workload::batch(self, ctx, seed)
    }

    fn learning_rate(&self) -> f64 {
        Workload::learning_rate(self)
    }

    fn checkpointed(&self, chunk: usize) -> Option<Arc<dyn DynWorkload>> {
        Workload::checkpointed(self, chunk).map(|w| Arc::new(w) as Arc<dyn DynWorkload>)
    }
}

type Reader = fn(&Node) -> std::result::Result<Arc<dyn DynWorkload>, Vec<ConfigIssue>>;

#[derive(Clone, Copy)]
struct Kind {
    name: &'static str,
    read: Reader,
}

/// Kinds by name, in registration order.
#[derive(Clone, Default)]
pub struct Registry {
    kinds: Vec<Kind>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl Registry {
    /// Adds `W`; a second kind of the same name is refused.
    pub fn register<W: Workload>(&mut self) -> std::result::Result<(), String> {
        if self.kinds.iter().any(|k| k.name == W::KIND) {
            return Err(format!("two workloads are registered as `{}`", W::KIND));
        }
        if W::KIND.is_empty() || !W::KIND.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!(
                "workload kind `{}` is not a plain name (letters, digits, `_`)",
                W::KIND
            ));
        }
        self.kinds.push(Kind {
            name: W::KIND,
            read: read_kind::<W>,
        });
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
    pub(crate) fn read(
        &self,
        kind: &str,
        config: &Node,
    ) -> Option<std::result::Result<Arc<dyn DynWorkload>, Vec<ConfigIssue>>> {
        self.kinds.iter().find(|k| k.name == kind).map(|k| (k.read)(config))
    }
}

fn read_kind<W: Workload>(node: &Node) -> std::result::Result<Arc<dyn DynWorkload>, Vec<ConfigIssue>> {
    read_workload::<W>(node).map(|w| Arc::new(w) as Arc<dyn DynWorkload>)
}

/// Reads `node` into `W::Config` and checks it with `W::from_config`; each
/// problem carries the position of its key.
pub(crate) fn read_workload<W: Workload>(node: &Node) -> std::result::Result<W, Vec<ConfigIssue>> {
    let defaults = serde_json::to_value(W::Config::default()).ok();
    let cfg: W::Config = config::read(node, defaults.as_ref())?;
    W::from_config(cfg).map_err(|problems| {
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

/// A config of plain `key: value` lines, for tests.
#[cfg(test)]
pub(crate) fn test_config(pairs: &[(&str, &str)]) -> Node {
    use super::config::{Pos, Value};
    let entries = pairs
        .iter()
        .enumerate()
        .map(|(i, (k, v))| {
            let pos = Pos { line: i + 2, col: 5 };
            let value = Value::Scalar {
                text: v.to_string(),
                quoted: false,
            };
            (k.to_string(), pos, Node { value, pos })
        })
        .collect();
    Node {
        value: Value::Map(entries),
        pos: Pos { line: 1, col: 1 },
    }
}

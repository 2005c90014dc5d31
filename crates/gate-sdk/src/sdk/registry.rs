//! The workload kinds a `gate` binary knows: the built-ins and whatever a
//! harness registers, each read from its spec config the same way. The
//! runner sees a workload only as [`DynWorkload`], the object-safe face of
//! [`Workload`].

use std::fmt;
use std::sync::Arc;

use candle_core::backprop::GradStore;
use candle_core::{Result, Var};
use candle_nn::VarBuilder;

use super::workload::{Batch, Model, OptimizerStep, ParamCount, RunCtx, Workload};
use gate_contract::plan::Lever;
use gate_spec::config::{ConfigIssue, Node};

/// A built workload as the runner uses it.
pub trait DynWorkload: fmt::Debug + Send + Sync {
    /// The `workload:` kind.
    // Unread outside tests since the runner names workloads by component
    // (this trait is private to the crate, so rustc says so); kept so a
    // `dyn DynWorkload` still says what it is.
    #[allow(dead_code)]
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
    /// See [`Workload::frozen_parameters`].
    fn frozen_parameters(&self) -> Vec<String>;
    /// See [`Workload::optimizer`].
    fn optimizer(&self, vars: Vec<Var>) -> Result<Option<Box<dyn OptimizerStep>>>;
    /// See [`Workload::before_update`].
    fn before_update(&self, grads: &mut GradStore, vars: &[Var]) -> Result<()>;
    /// See [`Workload::accumulation_steps`].
    fn accumulation_steps(&self) -> usize;
    /// See [`Workload::checkpointed`].
    fn checkpointed(&self, chunk: usize) -> Option<Arc<dyn DynWorkload>>;
    /// See [`Workload::levers`].
    fn levers(&self) -> Vec<Lever>;
    /// See [`Workload::generation_rows`].
    fn generation_rows(&self) -> Option<usize>;
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

    fn frozen_parameters(&self) -> Vec<String> {
        Workload::frozen_parameters(self)
    }

    fn optimizer(&self, vars: Vec<Var>) -> Result<Option<Box<dyn OptimizerStep>>> {
        Workload::optimizer(self, vars)
    }

    fn before_update(&self, grads: &mut GradStore, vars: &[Var]) -> Result<()> {
        Workload::before_update(self, grads, vars)
    }

    fn accumulation_steps(&self) -> usize {
        Workload::accumulation_steps(self)
    }

    fn learning_rate(&self) -> f64 {
        Workload::learning_rate(self)
    }

    fn checkpointed(&self, chunk: usize) -> Option<Arc<dyn DynWorkload>> {
        Workload::checkpointed(self, chunk).map(|inner| Arc::new(Chunked { inner, chunk }) as Arc<dyn DynWorkload>)
    }

    fn levers(&self) -> Vec<Lever> {
        Workload::levers(self)
    }

    fn generation_rows(&self) -> Option<usize> {
        Workload::generation_rows(self)
    }
}

/// A workload that [`Workload::checkpointed`] returned, with the chunk it was
/// given: its config records the checkpoint, so the variant's report and
/// fingerprint differ from the plain model's without a hand-written `describe`.
#[derive(Debug)]
struct Chunked<W> {
    inner: W,
    chunk: usize,
}

impl<W: Workload> DynWorkload for Chunked<W> {
    fn kind(&self) -> &'static str {
        W::KIND
    }

    fn config(&self) -> serde_json::Value {
        let mut json = Workload::describe(&self.inner);
        match json.as_object_mut() {
            // A workload that records its checkpoint itself (the TFT names its block) keeps its own.
            Some(map) if !map.contains_key("checkpoint") => {
                map.insert("checkpoint".into(), serde_json::json!({ "chunk": self.chunk }));
            }
            Some(_) => {}
            // A config that is not a map (a bare value) is kept whole beside the checkpoint.
            None => json = serde_json::json!({ "config": json, "checkpoint": { "chunk": self.chunk } }),
        }
        json
    }

    fn param_count(&self) -> ParamCount {
        Workload::param_count(&self.inner)
    }

    fn build(&self, vb: VarBuilder, ctx: &RunCtx) -> Result<Box<dyn Model>> {
        Workload::build(&self.inner, vb, ctx)
    }

    fn batch(&self, ctx: &RunCtx, seed: u64) -> Result<Batch> {
        Workload::batch(&self.inner, ctx, seed)
    }

    fn learning_rate(&self) -> f64 {
        Workload::learning_rate(&self.inner)
    }

    fn frozen_parameters(&self) -> Vec<String> {
        Workload::frozen_parameters(&self.inner)
    }

    fn optimizer(&self, vars: Vec<Var>) -> Result<Option<Box<dyn OptimizerStep>>> {
        Workload::optimizer(&self.inner, vars)
    }

    fn before_update(&self, grads: &mut GradStore, vars: &[Var]) -> Result<()> {
        Workload::before_update(&self.inner, grads, vars)
    }

    fn accumulation_steps(&self) -> usize {
        Workload::accumulation_steps(&self.inner)
    }

    fn checkpointed(&self, chunk: usize) -> Option<Arc<dyn DynWorkload>> {
        DynWorkload::checkpointed(&self.inner, chunk)
    }

    fn levers(&self) -> Vec<Lever> {
        Workload::levers(&self.inner)
    }

    fn generation_rows(&self) -> Option<usize> {
        Workload::generation_rows(&self.inner)
    }
}

// The registry and the resolve step are gate-runner's, the same for every
// framework; a kind here is a candle `Workload` (`dyn DynWorkload`).
impl gate_runner::harness::Resolvable for dyn DynWorkload {
    fn config(&self) -> serde_json::Value {
        DynWorkload::config(self)
    }

    fn checkpointed(&self, chunk: usize) -> Option<Arc<dyn DynWorkload>> {
        DynWorkload::checkpointed(self, chunk)
    }

    fn levers(&self) -> Vec<Lever> {
        DynWorkload::levers(self)
    }

    fn generation_rows(&self) -> Option<usize> {
        DynWorkload::generation_rows(self)
    }
}

/// Kinds by name, in registration order: gate-runner's registry of candle
/// workloads, with [`Registry::register`] for a [`Workload`] type.
#[derive(Clone, Default)]
pub struct Registry(gate_runner::harness::Registry<dyn DynWorkload>);

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::ops::Deref for Registry {
    type Target = gate_runner::harness::Registry<dyn DynWorkload>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Registry {
    /// Adds `W`; a second kind of the same name is refused.
    pub fn register<W: Workload>(&mut self) -> std::result::Result<(), String> {
        self.0.add(W::KIND, read_kind::<W>)
    }
}

fn read_kind<W: Workload>(node: &Node) -> std::result::Result<Arc<dyn DynWorkload>, Vec<ConfigIssue>> {
    read_workload::<W>(node).map(|w| Arc::new(w) as Arc<dyn DynWorkload>)
}

/// Reads `node` into `W::Config` and checks it with `W::from_config`; each
/// problem carries the position of its key.
#[cfg_attr(not(feature = "test-support"), allow(unreachable_pub))]
pub fn read_workload<W: Workload>(node: &Node) -> std::result::Result<W, Vec<ConfigIssue>> {
    gate_runner::harness::read_config(node, W::from_config)
}

/// A config of plain `key: value` lines, for tests.
#[cfg(any(test, feature = "test-support"))]
#[cfg_attr(not(feature = "test-support"), allow(unreachable_pub))]
pub fn test_config(pairs: &[(&str, &str)]) -> Node {
    use gate_spec::config::{Pos, Value};
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

#[cfg(test)]
mod tests {
    use super::*;
    use gate_spec::config::Problems;
    use serde::{Deserialize, Serialize};

    /// A workload written as docs/sdk.md shows it: `checkpointed` overridden, `describe` not.
    #[derive(Debug, Clone, Default, Serialize, Deserialize)]
    #[serde(default)]
    struct Keys {
        width: usize,
    }

    #[derive(Debug, Clone)]
    struct Blocks {
        keys: Keys,
        // What a real model's forward would read; the config must record it without being told.
        _chunk: Option<usize>,
    }

    impl Workload for Blocks {
        const KIND: &'static str = "blocks";
        type Config = Keys;
        fn from_config(keys: Keys) -> std::result::Result<Self, Problems> {
            Ok(Blocks { keys, _chunk: None })
        }
        fn config(&self) -> &Keys {
            &self.keys
        }
        fn param_count(&self) -> ParamCount {
            ParamCount::default()
        }
        fn build(&self, _vb: VarBuilder, _ctx: &RunCtx) -> Result<Box<dyn Model>> {
            candle_core::bail!("not built in this test")
        }
        fn batch(&self, _ctx: &RunCtx, _seed: u64) -> Result<Batch> {
            Ok(Batch::new(vec![]))
        }
        fn checkpointed(&self, chunk: usize) -> Option<Self> {
            Some(Blocks {
                _chunk: Some(chunk),
                ..self.clone()
            })
        }
    }

    #[test]
    fn a_checkpointed_variant_records_its_chunk_without_a_describe_of_its_own() {
        let plain: Arc<dyn DynWorkload> = Arc::new(Blocks::from_config(Keys { width: 8 }).unwrap());
        let variant = plain.checkpointed(16).expect("the workload opts in");
        assert_eq!(plain.config(), serde_json::json!({ "width": 8 }));
        assert_eq!(
            variant.config(),
            serde_json::json!({ "width": 8, "checkpoint": { "chunk": 16 } })
        );
        assert_eq!(variant.kind(), "blocks");
    }
}

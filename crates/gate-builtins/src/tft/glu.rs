//! GLU and GateAddNorm (docs/models.md §1): dropout → Linear(i, 2o) → first half ⊙
//! σ(second half); then LN(· + skip). TFT uses no trainable add.

use candle_core::{Result, Tensor, D};
use candle_nn::VarBuilder;

use super::dense::{Dense, Detached, LayerNorm, Stack};
use gate::Step;

#[derive(Debug, Clone)]
pub struct Glu {
    pub(super) fc: Dense,
    pub(super) output: usize,
    pub(super) dropout: f64,
}

impl Glu {
    pub fn new(input: usize, output: usize, dropout: f64, stack: Stack, vb: VarBuilder) -> Result<Self> {
        Ok(Glu {
            fc: Dense::new(input, 2 * output, true, stack, vb.pp("fc"))?,
            output,
            dropout,
        })
    }

    /// Takes `x` by value so that, with no graph, it is freed as soon as the
    /// projection exists (a shadowed binding would live to the end of the call).
    pub fn forward(&self, x: Tensor, step: &Step) -> Result<Tensor> {
        let y = self.fc.forward(&step.dropout(&x, self.dropout)?)?;
        drop(x);
        let value = y.narrow(D::Minus1, 0, self.output)?;
        let gate = y.narrow(D::Minus1, self.output, self.output)?;
        value.mul(&candle_nn::ops::sigmoid(&gate)?)
    }
}

/// LN(GLU(x) + skip).
#[derive(Debug, Clone)]
pub struct GateAddNorm {
    pub(super) glu: Glu,
    pub(super) norm: LayerNorm,
}

impl GateAddNorm {
    pub fn new(input: usize, output: usize, dropout: f64, stack: Stack, vb: VarBuilder) -> Result<Self> {
        Ok(GateAddNorm {
            glu: Glu::new(input, output, dropout, stack, vb.pp("glu"))?,
            norm: LayerNorm::new(output, stack, vb.pp("norm"))?,
        })
    }

    pub fn forward(&self, x: Tensor, skip: &Tensor, step: &Step) -> Result<Tensor> {
        let sum = (self.glu.forward(x, step)? + skip)?;
        self.norm.forward(&sum)
    }
}

impl Detached for GateAddNorm {
    fn detached(&self) -> Self {
        GateAddNorm {
            glu: Glu {
                fc: self.glu.fc.detached(),
                ..self.glu.clone()
            },
            norm: self.norm.detached(),
        }
    }
}

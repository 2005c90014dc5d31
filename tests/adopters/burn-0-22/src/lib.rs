//! The team's image classifier, written as burn code is: a `Module` of two
//! convolutions and a linear head, built on whatever device gate hands it.
//! Its gate workload (`ConvClassifier`) gives the config, the closed-form
//! parameter count, a seeded batch, the loss and the prediction; the
//! blocks whose memory the team wants attributed are `gate_burn::scoped`.

use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{BatchNorm, BatchNormConfig, Linear, LinearConfig, PaddingConfig2d};
use burn::optim::{AdamConfig, AdamWConfig, ModuleOptimizer, SgdConfig};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Distribution, Int, Tensor, TensorData};
use gate_burn::{scoped, BurnWorkload, ParamCount, Problems, RunCtx};
use serde::{Deserialize, Serialize};

/// The spec's `config:`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub in_channels: usize,
    pub image_size: usize,
    /// The first convolution's channels; the second has twice as many.
    pub channels: usize,
    pub kernel_size: usize,
    pub classes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            in_channels: 3,
            image_size: 32,
            channels: 16,
            kernel_size: 3,
            classes: 10,
        }
    }
}

/// conv(in→c) → ReLU → conv(c→2c) → ReLU → mean over the image → linear(2c→classes).
#[derive(Module, Debug)]
pub struct Net {
    conv1: Conv2d,
    conv2: Conv2d,
    head: Linear,
}

impl Net {
    fn forward(&self, images: Tensor<4>) -> Tensor<2> {
        let x = scoped("conv1", || relu(self.conv1.forward(images)));
        let x = scoped("conv2", || relu(self.conv2.forward(x)));
        scoped("head", || {
            let [b, c, _, _] = x.dims();
            // A `tracing` span, as a model written without gate opens them:
            // named under `spans:` in budgets.yaml, it is a block too.
            let pooled = tracing::info_span!("pool").in_scope(|| x.mean_dim(3).mean_dim(2).reshape([b, c]));
            self.head.forward(pooled)
        })
    }
}

/// A batch: images and their class labels.
pub struct Batch {
    images: Tensor<4>,
    labels: Tensor<1, Int>,
}

#[derive(Debug)]
pub struct ConvClassifier {
    config: Config,
}

impl BurnWorkload for ConvClassifier {
    const KIND: &'static str = "conv_classifier";
    type Config = Config;
    type Model = Net;
    type Batch = Batch;
    type Output = Tensor<2>;

    fn from_config(config: Config) -> Result<Self, Problems> {
        let mut p = Problems::new();
        p.at_least("in_channels", config.in_channels, 1);
        p.at_least("channels", config.channels, 1);
        p.at_least("classes", config.classes, 2);
        p.at_least("kernel_size", config.kernel_size, 1);
        p.at_least("image_size", config.image_size, config.kernel_size.max(1));
        p.finish(ConvClassifier { config })
    }

    fn config(&self) -> &Config {
        &self.config
    }

    fn param_count(&self) -> ParamCount {
        let c = &self.config;
        let (i, ch, k, n) = (
            c.in_channels as u64,
            c.channels as u64,
            c.kernel_size as u64,
            c.classes as u64,
        );
        let conv = |cin: u64, cout: u64| cin * cout * k * k + cout;
        ParamCount {
            elems: conv(i, ch) + conv(ch, 2 * ch) + (2 * ch * n + n),
        }
    }

    fn build(&self, device: &Device) -> Net {
        let c = &self.config;
        let k = [c.kernel_size, c.kernel_size];
        Net {
            conv1: Conv2dConfig::new([c.in_channels, c.channels], k)
                .with_padding(PaddingConfig2d::Same)
                .init(device),
            conv2: Conv2dConfig::new([c.channels, 2 * c.channels], k)
                .with_padding(PaddingConfig2d::Same)
                .init(device),
            head: LinearConfig::new(2 * c.channels, c.classes).init(device),
        }
    }

    fn batch(&self, device: &Device, ctx: &RunCtx, seed: u64) -> Batch {
        let c = &self.config;
        device.seed(seed);
        let images = Tensor::random(
            [ctx.batch_size, c.in_channels, c.image_size, c.image_size],
            Distribution::Normal(0.0, 1.0),
            device,
        );
        let labels: Vec<i64> = (0..ctx.batch_size)
            .map(|i| ((i as u64 * 7 + seed) % c.classes as u64) as i64)
            .collect();
        let labels = Tensor::from_data(TensorData::new(labels, [ctx.batch_size]), device);
        Batch { images, labels }
    }

    fn loss(&self, model: &Net, batch: &Batch) -> Tensor<1> {
        let logits = model.forward(batch.images.clone());
        scoped("loss", || {
            CrossEntropyLossConfig::new()
                .init(&logits.device())
                .forward(logits, batch.labels.clone())
        })
    }

    fn predict(&self, model: &Net, batch: &Batch) -> Tensor<2> {
        model.forward(batch.images.clone())
    }
}

/// The `optimizer:` key of `bn_classifier`: burn's own optimizers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Optim {
    /// Adam with AMSGrad: a running maximum of the second moment beside both moments.
    Amsgrad,
    Adam,
    Adamw,
    /// Plain SGD: no state.
    Sgd,
}

/// The spec's `config:` of `bn_classifier`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BnConfig {
    pub in_channels: usize,
    pub image_size: usize,
    /// The stem convolution's channels (a pretrained stem, kept frozen).
    pub stem: usize,
    /// The trained convolution's channels.
    pub width: usize,
    pub kernel_size: usize,
    pub classes: usize,
    pub optimizer: Optim,
}

impl Default for BnConfig {
    fn default() -> Self {
        BnConfig {
            in_channels: 3,
            image_size: 16,
            stem: 8,
            width: 16,
            kernel_size: 3,
            classes: 10,
            optimizer: Optim::Amsgrad,
        }
    }
}

/// A frozen stem (conv → BatchNorm → ReLU), a trained block (conv →
/// BatchNorm → ReLU), the mean over the image, a linear head. BatchNorm's
/// running statistics are burn's `RunningState`s: kept in the record,
/// never trained.
#[derive(Module, Debug)]
pub struct BnNet {
    stem: Conv2d,
    stem_norm: BatchNorm,
    conv: Conv2d,
    norm: BatchNorm,
    head: Linear,
}

impl BnNet {
    fn forward(&self, images: Tensor<4>) -> Tensor<2> {
        let x = relu(self.stem_norm.forward(self.stem.forward(images)));
        let x = relu(self.norm.forward(self.conv.forward(x)));
        let [b, c, _, _] = x.dims();
        self.head.forward(x.mean_dim(3).mean_dim(2).reshape([b, c]))
    }
}

/// The team's BatchNorm classifier: its stem is frozen on purpose and
/// declared so (`frozen_modules`), its optimizer chosen in the spec.
#[derive(Debug)]
pub struct BnClassifier {
    config: BnConfig,
}

/// `bn_classifier`'s closed form, by kind: (trained, frozen, running
/// statistics) elements. BatchNorm trains γ and β and keeps a running mean
/// and variance a channel.
pub fn bn_counts(c: &BnConfig) -> (u64, u64, u64) {
    let (i, s, w, k, n) = (
        c.in_channels as u64,
        c.stem as u64,
        c.width as u64,
        c.kernel_size as u64,
        c.classes as u64,
    );
    let conv = |cin: u64, cout: u64| cin * cout * k * k + cout;
    let trained = 2 * s + conv(s, w) + 2 * w + (w * n + n);
    (trained, conv(i, s), 2 * s + 2 * w)
}

impl BurnWorkload for BnClassifier {
    const KIND: &'static str = "bn_classifier";
    type Config = BnConfig;
    type Model = BnNet;
    type Batch = Batch;
    type Output = Tensor<2>;

    fn from_config(config: BnConfig) -> Result<Self, Problems> {
        let mut p = Problems::new();
        p.at_least("in_channels", config.in_channels, 1);
        p.at_least("stem", config.stem, 1);
        p.at_least("width", config.width, 1);
        p.at_least("classes", config.classes, 2);
        p.at_least("kernel_size", config.kernel_size, 1);
        p.at_least("image_size", config.image_size, config.kernel_size.max(1));
        p.finish(BnClassifier { config })
    }

    fn config(&self) -> &BnConfig {
        &self.config
    }

    fn param_count(&self) -> ParamCount {
        // The record: trained, frozen and running statistics alike.
        let (trained, frozen, running) = bn_counts(&self.config);
        ParamCount {
            elems: trained + frozen + running,
        }
    }

    fn build(&self, device: &Device) -> BnNet {
        let c = &self.config;
        let k = [c.kernel_size, c.kernel_size];
        BnNet {
            stem: Conv2dConfig::new([c.in_channels, c.stem], k)
                .with_padding(PaddingConfig2d::Same)
                .init(device),
            stem_norm: BatchNormConfig::new(c.stem).init(device),
            conv: Conv2dConfig::new([c.stem, c.width], k)
                .with_padding(PaddingConfig2d::Same)
                .init(device),
            norm: BatchNormConfig::new(c.width).init(device),
            head: LinearConfig::new(c.width, c.classes).init(device),
        }
    }

    fn frozen_modules(&self) -> Vec<String> {
        vec!["stem".into()]
    }

    fn optimizer(&self) -> ModuleOptimizer {
        match self.config.optimizer {
            Optim::Amsgrad => AdamConfig::new().with_amsgrad(true).init(),
            Optim::Adam => AdamConfig::new().init(),
            Optim::Adamw => AdamWConfig::new().init(),
            Optim::Sgd => SgdConfig::new().init(),
        }
    }

    fn batch(&self, device: &Device, ctx: &RunCtx, seed: u64) -> Batch {
        let c = &self.config;
        device.seed(seed);
        let images = Tensor::random(
            [ctx.batch_size, c.in_channels, c.image_size, c.image_size],
            Distribution::Normal(0.0, 1.0),
            device,
        );
        let labels: Vec<i64> = (0..ctx.batch_size)
            .map(|i| ((i as u64 * 3 + seed) % c.classes as u64) as i64)
            .collect();
        let labels = Tensor::from_data(TensorData::new(labels, [ctx.batch_size]), device);
        Batch { images, labels }
    }

    fn loss(&self, model: &BnNet, batch: &Batch) -> Tensor<1> {
        let logits = model.forward(batch.images.clone());
        CrossEntropyLossConfig::new()
            .init(&logits.device())
            .forward(logits, batch.labels.clone())
    }

    fn predict(&self, model: &BnNet, batch: &Batch) -> Tensor<2> {
        model.forward(batch.images.clone())
    }
}

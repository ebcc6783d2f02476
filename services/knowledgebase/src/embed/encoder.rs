//! The BERT encoder's forward pass, written for inference on a CPU with candle's tensors.
//!
//! candle-transformers' `BertModel` computes the same function, but spends most of a short
//! query's time outside the arithmetic: every linear layer multiplies by a transposed view of
//! its weight, which the matrix product repacks on every call, and GELU evaluates `erf` from
//! libm one element at a time. Here each weight is transposed once when loaded, the query,
//! key and value projections are one product, the attention scale is folded into the query
//! weights, and GELU uses a rational approximation of `erf` that the compiler vectorizes
//! (`gelu.rs`). On a 20-token query these cut the model's time by about half (BENCHMARKS.md).

use std::collections::HashMap;

use anyhow::{Context, anyhow, bail};
use candle_core::{DType, Device, Tensor};
use serde::Deserialize;

use super::gelu::Gelu;

/// The fields of a Hugging Face BERT `config.json` that the forward pass needs.
#[derive(Debug, Deserialize)]
pub(super) struct Config {
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    pub layer_norm_eps: f64,
    pub pad_token_id: usize,
    #[serde(default = "default_activation")]
    pub hidden_act: String,
    #[serde(default)]
    pub position_embedding_type: Option<String>,
    /// Prefix of the weight names in some exports (`bert.encoder...`).
    #[serde(default)]
    pub model_type: Option<String>,
}

fn default_activation() -> String {
    "gelu".to_owned()
}

pub(super) struct Encoder {
    word_embeddings: Tensor,
    position_embeddings: Tensor,
    /// Row 0 of the token type table: every input is one segment.
    token_type: Tensor,
    embedding_norm: Norm,
    layers: Vec<Layer>,
    heads: usize,
    head_size: usize,
    hidden: usize,
    max_positions: usize,
}

struct Layer {
    /// Query, key and value projections side by side: `[hidden, 3 * hidden]`.
    qkv: Dense,
    attention_out: Dense,
    attention_norm: Norm,
    up: Dense,
    down: Dense,
    output_norm: Norm,
}

/// A linear layer whose weight is stored `[in, out]`, contiguous.
struct Dense {
    weight: Tensor,
    bias: Tensor,
}

struct Norm {
    weight: Tensor,
    bias: Tensor,
    eps: f32,
}

/// The loaded safetensors file, looked up with or without the model type's prefix.
struct Weights {
    tensors: HashMap<String, Tensor>,
    prefix: String,
}

impl Weights {
    fn get(&self, name: &str) -> anyhow::Result<Tensor> {
        let tensor = self
            .tensors
            .get(name)
            .or_else(|| self.tensors.get(&format!("{}{name}", self.prefix)))
            .ok_or_else(|| anyhow!("the weights have no tensor named {name}"))?;
        // F16 and BF16 give NaN with this model's activations.
        if tensor.dtype() != DType::F32 {
            bail!("tensor {name} is {:?}; only F32 weights are supported", tensor.dtype());
        }
        Ok(tensor.clone())
    }

    fn dense(&self, name: &str) -> anyhow::Result<Dense> {
        Ok(Dense {
            weight: self.get(&format!("{name}.weight"))?.t()?.contiguous()?,
            bias: self.get(&format!("{name}.bias"))?,
        })
    }

    fn norm(&self, name: &str, eps: f64) -> anyhow::Result<Norm> {
        Ok(Norm {
            weight: self.get(&format!("{name}.weight"))?,
            bias: self.get(&format!("{name}.bias"))?,
            eps: eps as f32,
        })
    }
}

impl Encoder {
    pub(super) fn load(config: &Config, safetensors: &[u8], device: &Device) -> anyhow::Result<Self> {
        if config.hidden_act != "gelu" {
            bail!("activation {:?} is not supported; this encoder runs BERT models with \"gelu\"", config.hidden_act);
        }
        if config.position_embedding_type.as_deref().is_some_and(|kind| kind != "absolute") {
            bail!("only absolute position embeddings are supported");
        }
        if config.num_attention_heads == 0 || !config.hidden_size.is_multiple_of(config.num_attention_heads) {
            bail!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                config.hidden_size,
                config.num_attention_heads
            );
        }
        let tensors =
            candle_core::safetensors::load_buffer(safetensors, device).context("cannot parse the safetensors file")?;
        let prefix = config.model_type.as_deref().map(|kind| format!("{kind}.")).unwrap_or_default();
        let weights = Weights { tensors, prefix };
        let head_size = config.hidden_size / config.num_attention_heads;
        let eps = config.layer_norm_eps;

        let layers = (0..config.num_hidden_layers)
            .map(|i| {
                let at = |part: &str| format!("encoder.layer.{i}.{part}");
                let (query, key, value) = (
                    weights.dense(&at("attention.self.query"))?,
                    weights.dense(&at("attention.self.key"))?,
                    weights.dense(&at("attention.self.value"))?,
                );
                // softmax(q·kᵀ / √d): the division moves into the query's weight and bias.
                let scale = 1.0 / (head_size as f64).sqrt();
                let qkv = Dense {
                    weight: Tensor::cat(&[&(query.weight * scale)?, &key.weight, &value.weight], 1)?,
                    bias: Tensor::cat(&[&(query.bias * scale)?, &key.bias, &value.bias], 0)?,
                };
                Ok(Layer {
                    qkv,
                    attention_out: weights.dense(&at("attention.output.dense"))?,
                    attention_norm: weights.norm(&at("attention.output.LayerNorm"), eps)?,
                    up: weights.dense(&at("intermediate.dense"))?,
                    down: weights.dense(&at("output.dense"))?,
                    output_norm: weights.norm(&at("output.LayerNorm"), eps)?,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;

        let encoder = Self {
            word_embeddings: weights.get("embeddings.word_embeddings.weight")?,
            position_embeddings: weights.get("embeddings.position_embeddings.weight")?,
            token_type: weights.get("embeddings.token_type_embeddings.weight")?.get(0)?,
            embedding_norm: weights.norm("embeddings.LayerNorm", eps)?,
            layers,
            heads: config.num_attention_heads,
            head_size,
            hidden: config.hidden_size,
            max_positions: config.max_position_embeddings,
        };
        if encoder.position_embeddings.dim(0)? < encoder.max_positions {
            bail!("the position embeddings have fewer rows than max_position_embeddings");
        }
        if let Some(mismatch) =
            encoder.layers.iter().find(|layer| layer.up.weight.dims() != [config.hidden_size, config.intermediate_size])
        {
            bail!("an intermediate layer is {:?}, not [hidden_size, intermediate_size]", mismatch.up.weight.dims());
        }
        Ok(encoder)
    }

    /// Token vectors of the last layer, `(batch, tokens, hidden)`. `ids` and `mask` are
    /// `(batch, tokens)` u32; padding has mask 0 and is never attended to.
    pub(super) fn forward(&self, ids: &Tensor, mask: &Tensor) -> anyhow::Result<Tensor> {
        let (batch, tokens) = ids.dims2()?;
        if tokens > self.max_positions {
            bail!("{tokens} tokens exceed the model's {} positions", self.max_positions);
        }
        let rows = batch * tokens;
        let words = self.word_embeddings.index_select(&ids.flatten_all()?, 0)?.reshape((batch, tokens, self.hidden))?;
        let positions = self.position_embeddings.narrow(0, 0, tokens)?;
        let embedded =
            words.broadcast_add(&positions)?.broadcast_add(&self.token_type)?.reshape((rows, self.hidden))?;
        let mut x = self.embedding_norm.forward(&embedded)?;

        // Added to the attention scores: 0 for real tokens, the lowest float for padding (as
        // the reference implementation does). A batch without padding skips the addition.
        let padding = if mask.min_all()?.to_scalar::<u32>()? == 0 {
            let keep = mask.to_dtype(DType::F32)?;
            Some(((keep - 1.0)? * f64::from(f32::MAX))?.reshape((batch, 1, 1, tokens))?)
        } else {
            None
        };

        for layer in &self.layers {
            x = layer.forward(&x, batch, tokens, self, padding.as_ref())?;
        }
        Ok(x.reshape((batch, tokens, self.hidden))?)
    }
}

impl Layer {
    fn forward(
        &self,
        x: &Tensor,
        batch: usize,
        tokens: usize,
        shape: &Encoder,
        padding: Option<&Tensor>,
    ) -> anyhow::Result<Tensor> {
        let (heads, head_size, hidden) = (shape.heads, shape.head_size, shape.hidden);
        // (rows, 3·hidden) → (3, batch, heads, tokens, head_size)
        let qkv = self
            .qkv
            .forward(x)?
            .reshape((batch, tokens, 3, heads, head_size))?
            .permute((2, 0, 3, 1, 4))?
            .contiguous()?;
        let (query, key, value) = (qkv.get(0)?, qkv.get(1)?, qkv.get(2)?);
        let scores = query.matmul(&key.t()?)?;
        let scores = match padding {
            Some(padding) => scores.broadcast_add(padding)?,
            None => scores,
        };
        let attention = candle_nn::ops::softmax_last_dim(&scores)?;
        let context = attention.matmul(&value)?.transpose(1, 2)?.contiguous()?.reshape((batch * tokens, hidden))?;
        let x = self.attention_norm.forward(&(self.attention_out.forward(&context)? + x)?)?;

        let up = self.up.forward(&x)?.apply_op1_no_bwd(&Gelu)?;
        Ok(self.output_norm.forward(&(self.down.forward(&up)? + &x)?)?)
    }
}

impl Dense {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        x.matmul(&self.weight)?.broadcast_add(&self.bias)
    }
}

impl Norm {
    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        candle_nn::ops::layer_norm(x, &self.weight, &self.bias, self.eps)
    }
}

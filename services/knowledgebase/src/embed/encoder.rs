//! The forward pass of BERT-family encoders (BERT, MPNet), written for inference on a CPU with
//! candle's tensors.
//!
//! candle-transformers' `BertModel` computes the same function, but spends most of a short
//! query's time outside the arithmetic: every linear layer multiplies by a transposed view of
//! its weight, which the matrix product repacks on every call, and GELU evaluates `erf` from
//! libm one element at a time. Here each weight is transposed once when loaded, the query,
//! key and value projections are one product, the attention scale is folded into the query
//! weights, and GELU uses a rational approximation of `erf` that the compiler vectorizes
//! (`gelu.rs`). On a 20-token query these cut the model's time by about half (BENCHMARKS.md).
//! The bias additions, GELU, the residual additions and the attention's softmax then work in
//! place on the products' outputs, and the softmax skips padded keys rather than masking them
//! (`fused.rs`): a third off the time of long passages. The linear layers' products may run in
//! bfloat16 or in 8-bit integers ([`Precision`], `bf16.rs`, `int8.rs`).
//!
//! MPNet (all-mpnet-base-v2) has BERT's layers under other weight names, and differs only
//! around them: no token type embeddings, positions counted from `pad_token_id + 1` (as RoBERTa
//! does), and a bias by relative position, one table shared by all layers, added to every
//! layer's attention scores (see [`RelativeBias`]). `config.json`'s `model_type` (or, in
//! exports without it, `architectures`) says which of the two a model is.

use std::collections::HashMap;

use anyhow::{Context, anyhow, bail};
use candle_core::{CpuStorage, DType, Device, Storage, Tensor};
use serde::Deserialize;

use super::bf16::Bf16Weight;
use super::fused::{AddBias, AddBiasGelu, AddBiasResidual, LayerNorm, MaskedSoftmax};
use super::int8::{Int8Weight, Kernel};

/// The fields of a Hugging Face BERT or MPNet `config.json` that the forward pass needs.
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
    /// Which encoder this is, and the prefix of the weight names in some exports
    /// (`bert.encoder...`).
    #[serde(default)]
    pub model_type: Option<String>,
    /// The model classes of the export (`["BertModel"]`, `["MPNetForMaskedLM"]`): what tells the
    /// architecture when `model_type` is missing.
    #[serde(default)]
    pub architectures: Vec<String>,
}

/// The encoder families [`Encoder`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Architecture {
    Bert,
    MpNet,
}

/// The arithmetic of the linear layers' products.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Precision {
    F32,
    /// bfloat16 products with f32 sums, where the CPU has them (`bf16.rs`); F32 elsewhere.
    Bf16,
    /// 8-bit integer products with 32-bit sums (`int8.rs`), where the encoder was loaded with
    /// an integer kernel; F32 elsewhere.
    Int8,
}

impl Config {
    pub(super) fn architecture(&self) -> anyhow::Result<Architecture> {
        if let Some(kind) = &self.model_type {
            return match kind.to_ascii_lowercase().as_str() {
                "bert" => Ok(Architecture::Bert),
                "mpnet" => Ok(Architecture::MpNet),
                // A look-alike (RoBERTa, DistilBERT, ...) would load under BERT's names or fail
                // on one, and compute the wrong function where it loads: say so instead.
                _ => bail!("model_type {kind:?} is not supported; this encoder runs \"bert\" and \"mpnet\" models"),
            };
        }
        let class = |prefix: &str| self.architectures.iter().any(|name| name.starts_with(prefix));
        match (class("Bert"), class("MPNet")) {
            (_, true) => Ok(Architecture::MpNet),
            (true, false) => Ok(Architecture::Bert),
            // The files this service always ran: a BERT `config.json` of neither field.
            (false, false) if self.architectures.is_empty() => Ok(Architecture::Bert),
            (false, false) => bail!(
                "architectures {:?} are not supported; this encoder runs BERT and MPNet models",
                self.architectures
            ),
        }
    }
}

/// Where the two architectures keep the attention's weights inside `encoder.layer.N`; the
/// feed-forward part has the same names in both.
struct AttentionNames {
    query: &'static str,
    key: &'static str,
    value: &'static str,
    output: &'static str,
    norm: &'static str,
}

const BERT_ATTENTION: AttentionNames = AttentionNames {
    query: "attention.self.query",
    key: "attention.self.key",
    value: "attention.self.value",
    output: "attention.output.dense",
    norm: "attention.output.LayerNorm",
};

const MPNET_ATTENTION: AttentionNames = AttentionNames {
    query: "attention.attn.q",
    key: "attention.attn.k",
    value: "attention.attn.v",
    output: "attention.attn.o",
    norm: "attention.LayerNorm",
};

/// Buckets of MPNet's relative position bias. transformers' `MPNetEncoder` buckets with this
/// default whatever `relative_attention_num_buckets` says (it sizes only the table), so the
/// table must have exactly this many rows for the function to be the trained one.
const RELATIVE_BUCKETS: usize = 32;
/// Distances from this on share the last bucket of their side.
const RELATIVE_MAX_DISTANCE: usize = 128;

fn default_activation() -> String {
    "gelu".to_owned()
}

pub(super) struct Encoder {
    word_embeddings: Tensor,
    /// The rows of the position table that the tokens use, from the first token's: row 0 for
    /// BERT, `pad_token_id + 1` for MPNet.
    position_embeddings: Tensor,
    /// BERT: row 0 of the token type table, every input being one segment. MPNet has none.
    token_type: Option<Tensor>,
    /// MPNet only.
    relative_bias: Option<RelativeBias>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
    heads: usize,
    head_size: usize,
    hidden: usize,
    /// The longest input, special tokens included, that has a position embedding.
    max_tokens: usize,
}

/// MPNet's bias by relative position, T5's scheme: the key's offset from the query picks a
/// bucket (exact for near tokens, logarithmically wider further away, one side of the buckets
/// per direction), and the bucket a learned value per head, added to the scaled attention score.
struct RelativeBias {
    /// `[RELATIVE_BUCKETS, heads]`.
    table: Tensor,
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
    /// The weight again for the bfloat16 kernel, on CPUs that have it.
    bf16: Option<Bf16Weight>,
    /// The weight rounded to integers, when the encoder was loaded with an integer kernel.
    int8: Option<Int8Weight>,
}

struct Norm {
    weight: Vec<f32>,
    bias: Vec<f32>,
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
        Ok(Dense::new(self.get(&format!("{name}.weight"))?.t()?.contiguous()?, self.get(&format!("{name}.bias"))?))
    }

    fn norm(&self, name: &str, eps: f64) -> anyhow::Result<Norm> {
        Ok(Norm {
            weight: self.get(&format!("{name}.weight"))?.to_vec1::<f32>()?,
            bias: self.get(&format!("{name}.bias"))?.to_vec1::<f32>()?,
            eps: eps as f32,
        })
    }
}

impl Encoder {
    /// `int8`: the kernel of the integer products, if they may be used (see [`Precision::Int8`]).
    pub(super) fn load(
        config: &Config,
        safetensors: &[u8],
        device: &Device,
        int8: Option<Kernel>,
    ) -> anyhow::Result<Self> {
        if config.hidden_act != "gelu" {
            bail!(
                "activation {:?} is not supported; this encoder runs BERT and MPNet models with \"gelu\"",
                config.hidden_act
            );
        }
        let architecture = config.architecture()?;
        if architecture == Architecture::Bert
            && config.position_embedding_type.as_deref().is_some_and(|kind| kind != "absolute")
        {
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

        let names = match architecture {
            Architecture::Bert => &BERT_ATTENTION,
            Architecture::MpNet => &MPNET_ATTENTION,
        };

        let layers = (0..config.num_hidden_layers)
            .map(|i| {
                let at = |part: &str| format!("encoder.layer.{i}.{part}");
                let (query, key, value) = (
                    weights.dense(&at(names.query))?,
                    weights.dense(&at(names.key))?,
                    weights.dense(&at(names.value))?,
                );
                // softmax(q·kᵀ / √d): the division moves into the query's weight and bias.
                let scale = 1.0 / (head_size as f64).sqrt();
                let qkv = Dense::new(
                    Tensor::cat(&[&(query.weight * scale)?, &key.weight, &value.weight], 1)?,
                    Tensor::cat(&[&(query.bias * scale)?, &key.bias, &value.bias], 0)?,
                )
                .packed(int8)?;
                Ok(Layer {
                    qkv,
                    attention_out: weights.dense(&at(names.output))?.packed(int8)?,
                    attention_norm: weights.norm(&at(names.norm), eps)?,
                    up: weights.dense(&at("intermediate.dense"))?.packed(int8)?,
                    down: weights.dense(&at("output.dense"))?.packed(int8)?,
                    output_norm: weights.norm(&at("output.LayerNorm"), eps)?,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;

        let positions = weights.get("embeddings.position_embeddings.weight")?;
        if positions.dim(0)? < config.max_position_embeddings {
            bail!("the position embeddings have fewer rows than max_position_embeddings");
        }
        let (first_position, token_type, relative_bias) = match architecture {
            Architecture::Bert => (0, Some(weights.get("embeddings.token_type_embeddings.weight")?.get(0)?), None),
            Architecture::MpNet => {
                let table = weights.get("encoder.relative_attention_bias.weight")?;
                if table.dims() != [RELATIVE_BUCKETS, config.num_attention_heads] {
                    bail!(
                        "the relative attention bias is {:?}, not [{RELATIVE_BUCKETS}, num_attention_heads]",
                        table.dims()
                    );
                }
                // transformers numbers real tokens from pad_token_id + 1 and gives padding
                // pad_token_id (`create_position_ids_from_input_ids`). Here padding comes last and
                // is masked, so its positions change nothing: the rows from pad_token_id + 1 on
                // serve every token.
                (config.pad_token_id + 1, None, Some(RelativeBias { table }))
            }
        };
        let max_tokens = config
            .max_position_embeddings
            .checked_sub(first_position)
            .filter(|&n| n > 0)
            .ok_or_else(|| anyhow!("pad_token_id {} leaves no position embeddings to use", config.pad_token_id))?;
        let encoder = Self {
            word_embeddings: weights.get("embeddings.word_embeddings.weight")?,
            position_embeddings: positions.narrow(0, first_position, max_tokens)?.contiguous()?,
            token_type,
            relative_bias,
            embedding_norm: weights.norm("embeddings.LayerNorm", eps)?,
            layers,
            heads: config.num_attention_heads,
            head_size,
            hidden: config.hidden_size,
            max_tokens,
        };
        if let Some(mismatch) =
            encoder.layers.iter().find(|layer| layer.up.weight.dims() != [config.hidden_size, config.intermediate_size])
        {
            bail!("an intermediate layer is {:?}, not [hidden_size, intermediate_size]", mismatch.up.weight.dims());
        }
        Ok(encoder)
    }

    /// The longest input, special tokens included, the model has positions for.
    pub(super) fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    /// Token vectors of the last layer, `(batch, tokens, hidden)`. `ids` and `mask` are
    /// `(batch, tokens)` u32; padding has mask 0, comes after the real tokens and is never
    /// attended to.
    pub(super) fn forward(&self, ids: &Tensor, mask: &Tensor, precision: Precision) -> anyhow::Result<Tensor> {
        let (batch, tokens) = ids.dims2()?;
        if tokens > self.max_tokens {
            bail!("{tokens} tokens exceed the model's {} positions", self.max_tokens);
        }
        let rows = batch * tokens;
        let words = self.word_embeddings.index_select(&ids.flatten_all()?, 0)?.reshape((batch, tokens, self.hidden))?;
        let positions = self.position_embeddings.narrow(0, 0, tokens)?;
        let mut embedded = words.broadcast_add(&positions)?;
        if let Some(token_type) = &self.token_type {
            embedded = embedded.broadcast_add(token_type)?;
        }
        // `embedded` is a fresh sum of the tables' rows: the normalisation may work in it.
        let mut x = self.embedding_norm.forward(embedded.reshape((rows, self.hidden))?)?;

        // Padding comes after each input's real tokens: the softmax needs only how many there
        // are, and gives the padded keys no weight (`MaskedSoftmax`).
        let lengths: Vec<usize> =
            mask.to_vec2::<u32>()?.iter().map(|row| row.iter().take_while(|&&keep| keep != 0).count()).collect();
        // MPNet's relative bias is the same for every layer: made once per call.
        let bias = self.relative_bias.as_ref().map(|bias| bias.for_tokens(tokens)).transpose()?;

        for layer in &self.layers {
            x = layer.forward(&x, (batch, tokens, &lengths), (self, precision), bias.as_ref())?;
        }
        Ok(x.reshape((batch, tokens, self.hidden))?)
    }
}

impl Layer {
    /// `inputs`: the batch size, the tokens of each input with padding, and each input's real
    /// tokens.
    fn forward(
        &self,
        x: &Tensor,
        inputs: (usize, usize, &[usize]),
        (shape, precision): (&Encoder, Precision),
        bias: Option<&Tensor>,
    ) -> anyhow::Result<Tensor> {
        let (batch, tokens, lengths) = inputs;
        let (heads, head_size, hidden) = (shape.heads, shape.head_size, shape.hidden);
        // (rows, 3·hidden) → (3, batch, heads, tokens, head_size)
        let qkv = self
            .qkv
            .forward(x, precision)?
            .reshape((batch, tokens, 3, heads, head_size))?
            .permute((2, 0, 3, 1, 4))?
            .contiguous()?;
        let (query, key, value) = (qkv.get(0)?, qkv.get(1)?, qkv.get(2)?);
        let scores = query.matmul(&key.t()?)?;
        let scores = match bias {
            Some(bias) => scores.broadcast_add(bias)?,
            None => scores,
        };
        scores.inplace_op1(&MaskedSoftmax { lengths })?;
        let context = scores.matmul(&value)?.transpose(1, 2)?.contiguous()?.reshape((batch * tokens, hidden))?;
        let x = self.attention_norm.forward(self.attention_out.forward_residual(&context, x, precision)?)?;

        let up = self.up.forward_gelu(&x, precision)?;
        Ok(self.output_norm.forward(self.down.forward_residual(&up, &x, precision)?)?)
    }
}

impl RelativeBias {
    /// The bias of every query and key position of an input of `tokens`:
    /// `(1, heads, tokens, tokens)`. Relative positions do not depend on the batch, nor on the
    /// padding, which is at the end.
    fn for_tokens(&self, tokens: usize) -> anyhow::Result<Tensor> {
        let heads = self.table.dim(1)?;
        let buckets: Vec<u32> =
            (0..tokens).flat_map(|query| (0..tokens).map(move |key| relative_bucket(query, key))).collect();
        let buckets = Tensor::from_vec(buckets, tokens * tokens, self.table.device())?;
        // (tokens², heads) → (heads, tokens²) → (1, heads, tokens, tokens)
        Ok(self.table.index_select(&buckets, 0)?.t()?.contiguous()?.reshape((1, heads, tokens, tokens))?)
    }
}

/// The bucket of a key at position `key` seen from a query at `query`: the first half of the
/// buckets for keys at or before the query, the second for keys after it; within a half,
/// distances below a quarter of the buckets have a bucket each, longer ones share buckets whose
/// width grows geometrically up to `RELATIVE_MAX_DISTANCE`, and anything further shares the
/// half's last bucket. The same arithmetic as transformers' `relative_position_bucket`, which
/// computes the logarithm in f32; the test below checks that f64 lands every distance in the
/// same bucket as the exact (integer) answer.
fn relative_bucket(query: usize, key: usize) -> u32 {
    let half = RELATIVE_BUCKETS / 2;
    let side = if key > query { half } else { 0 };
    let distance = key.abs_diff(query);
    let exact = half / 2;
    let within = if distance < exact {
        distance
    } else {
        let growth = (distance as f64 / exact as f64).ln() / (RELATIVE_MAX_DISTANCE as f64 / exact as f64).ln();
        // Truncation, as the reference's conversion to an integer; the value is positive.
        (exact + (growth * (half - exact) as f64) as usize).min(half - 1)
    };
    // At most RELATIVE_BUCKETS - 1.
    (side + within) as u32
}

// Each step below works in place on the product's output, which nothing else holds yet.
impl Dense {
    fn new(weight: Tensor, bias: Tensor) -> Self {
        Self { weight, bias, bf16: None, int8: None }
    }

    /// This layer with its weight packed for the bfloat16 kernel, where the CPU runs it, and
    /// for the integer kernel `int8`, if given. Only for the layers the forward pass uses: not
    /// the query, key and value parts of `qkv`.
    fn packed(mut self, int8: Option<Kernel>) -> anyhow::Result<Self> {
        let (inputs, outputs) = self.weight.dims2()?;
        if super::bf16::supported() || int8.is_some() {
            let weight = self.weight.flatten_all()?.to_vec1::<f32>()?;
            if super::bf16::supported() {
                self.bf16 = Bf16Weight::pack(&weight, inputs, outputs);
            }
            self.int8 = int8.and_then(|kernel| Int8Weight::pack(&weight, inputs, outputs, kernel));
        }
        Ok(self)
    }

    fn product(&self, x: &Tensor, precision: Precision) -> candle_core::Result<Tensor> {
        match (precision, &self.bf16, &self.int8) {
            (Precision::Bf16, Some(packed), _) => packed_product(x, packed.outputs(), |v, rows| packed.matmul(v, rows)),
            (Precision::Int8, _, Some(packed)) => packed_product(x, packed.outputs(), |v, rows| packed.matmul(v, rows)),
            _ => x.matmul(&self.weight),
        }
    }

    fn forward(&self, x: &Tensor, precision: Precision) -> candle_core::Result<Tensor> {
        let y = self.product(x, precision)?;
        y.inplace_op2(&self.bias, &AddBias)?;
        Ok(y)
    }

    fn forward_gelu(&self, x: &Tensor, precision: Precision) -> candle_core::Result<Tensor> {
        let y = self.product(x, precision)?;
        y.inplace_op2(&self.bias, &AddBiasGelu)?;
        Ok(y)
    }

    /// The layer's output plus `residual`, the input of the block it closes.
    fn forward_residual(&self, x: &Tensor, residual: &Tensor, precision: Precision) -> candle_core::Result<Tensor> {
        let y = self.product(x, precision)?;
        y.inplace_op3(&self.bias, residual, &AddBiasResidual)?;
        Ok(y)
    }
}

/// `product` of the values of `x`, a contiguous `(rows, inputs)` F32 tensor on the CPU, as a
/// `(rows, outputs)` tensor.
fn packed_product(
    x: &Tensor,
    outputs: usize,
    product: impl FnOnce(&[f32], usize) -> anyhow::Result<Vec<f32>>,
) -> candle_core::Result<Tensor> {
    let (rows, _) = x.dims2()?;
    let out = {
        let (storage, layout) = x.storage_and_layout();
        let (Storage::Cpu(CpuStorage::F32(values)), Some((start, end))) = (&*storage, layout.contiguous_offsets())
        else {
            candle_core::bail!("the packed products take a contiguous F32 tensor on the CPU");
        };
        product(&values[start..end], rows).map_err(|e| candle_core::Error::Msg(format!("{e:#}")))?
    };
    Tensor::from_vec(out, (rows, outputs), x.device())
}

impl Norm {
    /// Normalises `x` in place: it is a step's fresh output, which nothing else holds.
    fn forward(&self, x: Tensor) -> candle_core::Result<Tensor> {
        x.inplace_op1(&LayerNorm { weight: &self.weight, bias: &self.bias, eps: self.eps })?;
        Ok(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_buckets_are_exact_near_logarithmic_far_and_one_side_per_direction() {
        // With 32 buckets and a maximum distance of 128, a distance d ≥ 8 lands in
        // 8 + ⌊8·log₁₆(d/8)⌋ = 2 + ⌊log₂ d²⌋, capped at 15: computed here without floats.
        let expected = |distance: usize| -> u32 {
            if distance < 8 { distance as u32 } else { (2 + (distance * distance).ilog2()).min(15) }
        };
        for distance in 0..600 {
            let before = relative_bucket(distance, 0);
            assert_eq!(before, expected(distance), "key {distance} before the query");
            if distance > 0 {
                let after = relative_bucket(1000, 1000 + distance);
                assert_eq!(after, 16 + expected(distance), "key {distance} after the query");
            }
        }
        assert_eq!(relative_bucket(5, 5), 0);
        // The boundaries of the logarithmic buckets: 16 starts bucket 10, 32 bucket 12, 64 bucket 14.
        assert_eq!([15, 16, 31, 32, 63, 64, 127, 128].map(|d| relative_bucket(d, 0)), [9, 10, 11, 12, 13, 14, 15, 15]);
    }

    #[test]
    fn the_architecture_comes_from_the_model_type_or_the_classes() {
        let config = |model_type: Option<&str>, architectures: &[&str]| -> Config {
            let mut json = serde_json::json!({
                "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16,
                "max_position_embeddings": 16, "layer_norm_eps": 1e-12, "pad_token_id": 0,
                "architectures": architectures,
            });
            if let Some(kind) = model_type {
                json["model_type"] = kind.into();
            }
            serde_json::from_value(json).unwrap()
        };
        assert_eq!(config(Some("bert"), &["BertModel"]).architecture().unwrap(), Architecture::Bert);
        assert_eq!(config(Some("mpnet"), &["MPNetForMaskedLM"]).architecture().unwrap(), Architecture::MpNet);
        assert_eq!(config(None, &["MPNetModel"]).architecture().unwrap(), Architecture::MpNet);
        assert_eq!(config(None, &["BertForMaskedLM"]).architecture().unwrap(), Architecture::Bert);
        assert_eq!(config(None, &[]).architecture().unwrap(), Architecture::Bert);
        let error = config(Some("roberta"), &["RobertaModel"]).architecture().unwrap_err().to_string();
        assert!(error.contains("roberta"), "{error}");
        assert!(config(None, &["DistilBertModel"]).architecture().is_err());
    }
}

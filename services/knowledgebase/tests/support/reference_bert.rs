//! candle-transformers' `BertModel` with mean pooling: the implementation the service used
//! before its own encoder, kept to check that the encoder computes the same vectors and to
//! time both in the same run (`examples/embed_bench.rs`).

use std::path::Path;

use anyhow::{Context, anyhow};
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{Tokenizer, TruncationParams};

pub struct ReferenceBert {
    model: BertModel,
    tokenizer: Tokenizer,
}

impl ReferenceBert {
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        let config: Config = serde_json::from_slice(&std::fs::read(dir.join("config.json"))?)?;
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json")).map_err(|e| anyhow!("{e}"))?;
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: 256, ..TruncationParams::default() }))
            .map_err(|e| anyhow!("{e}"))?;
        let bytes = std::fs::read(dir.join("model.safetensors"))?;
        let vb = VarBuilder::from_buffered_safetensors(bytes, DType::F32, &Device::Cpu)?;
        Ok(Self { model: BertModel::load(vb, &config).context("cannot load the reference model")?, tokenizer })
    }

    /// One text at a time (no padding), truncated to 256 tokens like the service.
    pub fn embed(&self, text: &str) -> anyhow::Result<Vec<f32>> {
        let encoding = self.tokenizer.encode(text, true).map_err(|e| anyhow!("{e}"))?;
        let ids = Tensor::new(encoding.get_ids(), &Device::Cpu)?.unsqueeze(0)?;
        let hidden = self.model.forward(&ids, &ids.zeros_like()?, None)?;
        let mean = hidden.mean(1)?.squeeze(0)?;
        let norm = mean.sqr()?.sum_all()?.sqrt()?;
        Ok(mean.broadcast_div(&norm)?.to_vec1::<f32>()?)
    }
}

//! The element-wise steps of a layer, done in place on the matrix product's output.
//!
//! On SciFact's 180-256-token passages, candle's generic steps took as long as the products
//! themselves (a profile of `embed_bench`: products 51 %, `broadcast_add` 21 %, softmax 19 %).
//! `broadcast_add` works out every element's index through the broadcast, and each step
//! allocates a fresh tensor, whose pages the kernel then zeroes. The padding mask was a whole
//! `(batch, heads, tokens, tokens)` addition before a softmax that called libm's `expf` per
//! score. Here a bias is added (with GELU, or with the residual) in the same pass over the
//! product's output, and the softmax skips the padded keys instead of adding a mask to them,
//! with an `exp` the compiler vectorizes.

use candle_core::{CpuStorage, InplaceOp1, InplaceOp2, InplaceOp3, Layout, bail};
use rayon::prelude::*;

use super::gelu::gelu;

/// `x += bias`, row by row.
pub(super) struct AddBias;

/// `x = gelu(x + bias)`.
pub(super) struct AddBiasGelu;

/// `x += bias + residual`.
pub(super) struct AddBiasResidual;

/// Layer normalisation of each row (as wide as `weight`): `(x - mean) / sqrt(variance + eps)`,
/// scaled by `weight` and shifted by `bias`. candle's own sums each row in one chain of
/// additions, which the compiler cannot vectorize: 6 % of a passage's time once the products
/// were integers (issue 57).
pub(super) struct LayerNorm<'a> {
    pub weight: &'a [f32],
    pub bias: &'a [f32],
    pub eps: f32,
}

/// Softmax over the last dimension of attention scores `(batch, heads, tokens, tokens)`, where
/// input `b` has `lengths[b]` real tokens followed by padding: each row's first `lengths[b]`
/// scores become probabilities, and the padded keys get exactly 0, which is what adding the
/// lowest float before the softmax gave.
pub(super) struct MaskedSoftmax<'a> {
    pub lengths: &'a [usize],
}

fn values<'a>(storage: &'a CpuStorage, layout: &Layout, op: &str) -> candle_core::Result<&'a [f32]> {
    let CpuStorage::F32(values) = storage else {
        bail!("{op}: only F32 tensors are supported");
    };
    let Some((start, end)) = layout.contiguous_offsets() else {
        bail!("{op}: the input must be contiguous");
    };
    Ok(&values[start..end])
}

fn values_mut<'a>(storage: &'a mut CpuStorage, layout: &Layout, op: &str) -> candle_core::Result<&'a mut [f32]> {
    let CpuStorage::F32(values) = storage else {
        bail!("{op}: only F32 tensors are supported");
    };
    let Some((start, end)) = layout.contiguous_offsets() else {
        bail!("{op}: the input must be contiguous");
    };
    Ok(&mut values[start..end])
}

/// The rows of `x` (as wide as `bias`) with the bias beside each.
fn rows<'a>(
    x: &'a mut [f32],
    bias: &'a [f32],
    op: &str,
) -> candle_core::Result<impl Iterator<Item = (&'a mut [f32], &'a [f32])>> {
    if bias.is_empty() || !x.len().is_multiple_of(bias.len()) {
        bail!("{op}: {} values are not rows of the bias's {}", x.len(), bias.len());
    }
    Ok(x.chunks_exact_mut(bias.len()).map(move |row| (row, bias)))
}

/// `x = then(x + bias)` over every row: the one pass `AddBias` and `AddBiasGelu` make.
fn add_bias_then(
    op: &str,
    (s1, l1): (&mut CpuStorage, &Layout),
    (s2, l2): (&CpuStorage, &Layout),
    then: impl Fn(f32) -> f32 + Copy,
) -> candle_core::Result<()> {
    let bias = values(s2, l2, op)?;
    for (row, bias) in rows(values_mut(s1, l1, op)?, bias, op)? {
        wide::add_then(row, bias, then);
    }
    Ok(())
}

/// The element-wise loops compiled twice: for the baseline x86-64 target (SSE2, 4 floats a
/// step) and for AVX2 (8 a step), picked when they run. Their loops are `for` loops: an
/// iterator's `for_each` goes through `fold`, a function of its own that is compiled for the
/// baseline and not inlined here. The same operations either way (no
/// fused multiply-add), so the same numbers. GELU and the softmax's `exp` were an eighth of a
/// passage's time on SSE2 once the products were integers (issue 57).
#[allow(unsafe_code)]
mod wide {
    #[inline(always)]
    fn add_then_portable(row: &mut [f32], bias: &[f32], then: impl Fn(f32) -> f32) {
        for (x, b) in row.iter_mut().zip(bias) {
            *x = then(*x + b);
        }
    }

    #[inline(always)]
    fn softmax_rows_portable(input: &mut [f32], keys: usize, length: usize) {
        for row in input.chunks_exact_mut(keys) {
            super::softmax_row(row, length);
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn add_then_avx2(row: &mut [f32], bias: &[f32], then: impl Fn(f32) -> f32) {
        add_then_portable(row, bias, then);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn softmax_rows_avx2(input: &mut [f32], keys: usize, length: usize) {
        softmax_rows_portable(input, keys, length);
    }

    fn avx2() -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            std::arch::is_x86_feature_detected!("avx2")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    }

    /// `row[i] = then(row[i] + bias[i])`.
    pub(super) fn add_then(row: &mut [f32], bias: &[f32], then: impl Fn(f32) -> f32) {
        #[cfg(target_arch = "x86_64")]
        if avx2() {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { add_then_avx2(row, bias, then) };
        }
        add_then_portable(row, bias, then);
    }

    /// The softmax of each row of `keys` scores over its first `length` (see `softmax_row`).
    pub(super) fn softmax_rows(input: &mut [f32], keys: usize, length: usize) {
        #[cfg(target_arch = "x86_64")]
        if avx2() {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { softmax_rows_avx2(input, keys, length) };
        }
        softmax_rows_portable(input, keys, length);
    }
}

impl InplaceOp2 for AddBias {
    fn name(&self) -> &'static str {
        "add-bias"
    }

    fn cpu_fwd(&self, s1: &mut CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> candle_core::Result<()> {
        add_bias_then(self.name(), (s1, l1), (s2, l2), |x| x)
    }
}

impl InplaceOp2 for AddBiasGelu {
    fn name(&self) -> &'static str {
        "add-bias-gelu"
    }

    fn cpu_fwd(&self, s1: &mut CpuStorage, l1: &Layout, s2: &CpuStorage, l2: &Layout) -> candle_core::Result<()> {
        add_bias_then(self.name(), (s1, l1), (s2, l2), gelu)
    }
}

impl InplaceOp3 for AddBiasResidual {
    fn name(&self) -> &'static str {
        "add-bias-residual"
    }

    fn cpu_fwd(
        &self,
        s1: &mut CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> candle_core::Result<()> {
        let (bias, residual) = (values(s2, l2, self.name())?, values(s3, l3, self.name())?);
        let x = values_mut(s1, l1, self.name())?;
        if residual.len() != x.len() {
            bail!("{}: the residual has {} values, the output {}", self.name(), residual.len(), x.len());
        }
        for ((row, bias), residual) in rows(x, bias, self.name())?.zip(residual.chunks_exact(bias.len())) {
            for ((x, b), r) in row.iter_mut().zip(bias).zip(residual) {
                *x += b + r;
            }
        }
        Ok(())
    }
}

impl InplaceOp1 for LayerNorm<'_> {
    fn name(&self) -> &'static str {
        "layer-norm"
    }

    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> candle_core::Result<()> {
        let width = self.weight.len();
        let x = values_mut(storage, layout, self.name())?;
        if width == 0 || self.bias.len() != width || !x.len().is_multiple_of(width) {
            bail!("{}: {} values are not rows of the weight's {width}", self.name(), x.len());
        }
        let n = width as f32;
        for row in x.chunks_exact_mut(width) {
            let mean = sum(row) / n;
            let variance = sum_of_squares(row, mean) / n;
            let inverse = 1.0 / (variance + self.eps).sqrt();
            for ((x, weight), bias) in row.iter_mut().zip(self.weight).zip(self.bias) {
                *x = (*x - mean) * inverse * weight + bias;
            }
        }
        Ok(())
    }
}

impl InplaceOp1 for MaskedSoftmax<'_> {
    fn name(&self) -> &'static str {
        "masked-softmax"
    }

    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> candle_core::Result<()> {
        let dims = layout.shape().dims();
        let &[batch, _heads, tokens, keys] = dims else {
            bail!("{}: the scores must be (batch, heads, tokens, tokens), not {dims:?}", self.name());
        };
        if batch != self.lengths.len() || tokens != keys || self.lengths.iter().any(|&n| n > keys) {
            bail!("{}: lengths {:?} do not fit scores {dims:?}", self.name(), self.lengths);
        }
        let scores = values_mut(storage, layout, self.name())?;
        let per_input = scores.len() / batch;
        // Row by row, over the calling pool's threads: one on an ingestion worker, every core
        // for a lone query (see `threads.rs`).
        scores.par_chunks_mut(per_input).zip(self.lengths.par_iter()).for_each(|(input, &length)| {
            // Every input has at least [CLS] and [SEP]; a zero would mean no padding was marked.
            let length = if length == 0 { keys } else { length };
            wide::softmax_rows(input, keys, length);
        });
        Ok(())
    }
}

#[inline(always)]
fn softmax_row(row: &mut [f32], length: usize) {
    let (kept, padded) = row.split_at_mut(length);
    let max = largest(kept);
    for x in kept.iter_mut() {
        *x = exp(*x - max);
    }
    let sum = sum(kept);
    let scale = 1.0 / sum;
    for x in kept.iter_mut() {
        *x *= scale;
    }
    padded.fill(0.0);
}

/// A sum the compiler can vectorize: eight running sums instead of one chain of additions.
#[inline(always)]
fn sum(values: &[f32]) -> f32 {
    let mut lanes = [0.0_f32; 8];
    let chunks = values.chunks_exact(8);
    let tail: f32 = chunks.remainder().iter().sum();
    for chunk in chunks {
        for (lane, x) in lanes.iter_mut().zip(chunk) {
            *lane += x;
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// Σ (x - mean)², in eight running sums as [`sum`].
fn sum_of_squares(values: &[f32], mean: f32) -> f32 {
    let mut lanes = [0.0_f32; 8];
    let chunks = values.chunks_exact(8);
    let tail: f32 = chunks.remainder().iter().map(|x| (x - mean) * (x - mean)).sum();
    for chunk in chunks {
        for (lane, x) in lanes.iter_mut().zip(chunk) {
            *lane += (x - mean) * (x - mean);
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// The largest of `values` (-∞ for none), in eight running maxima as [`largest_magnitude`].
#[inline(always)]
fn largest(values: &[f32]) -> f32 {
    let larger = |largest: f32, x: f32| if x > largest { x } else { largest };
    let mut lanes = [f32::NEG_INFINITY; 8];
    let chunks = values.chunks_exact(8);
    let tail = chunks.remainder().iter().fold(f32::NEG_INFINITY, |largest, &x| larger(largest, x));
    for chunk in chunks {
        for (lane, &x) in lanes.iter_mut().zip(chunk) {
            *lane = larger(*lane, x);
        }
    }
    lanes.into_iter().fold(tail, larger)
}

/// The largest magnitude of `values` (0 for none), in eight running maxima that the compiler
/// vectorizes; `f32::max` in one chain stays scalar. A NaN is passed over.
pub(super) fn largest_magnitude(values: &[f32]) -> f32 {
    let larger = |largest: f32, x: f32| if x.abs() > largest { x.abs() } else { largest };
    let mut lanes = [0.0_f32; 8];
    let chunks = values.chunks_exact(8);
    let tail = chunks.remainder().iter().fold(0.0, |largest, &x| larger(largest, x));
    for chunk in chunks {
        for (lane, &x) in lanes.iter_mut().zip(chunk) {
            *lane = larger(*lane, x);
        }
    }
    lanes.into_iter().fold(tail, larger)
}

/// eˣ within about two units in the last place, from only multiplications, additions and
/// integer bit operations, so that a loop of it vectorizes (libm's `expf` is a call per
/// element). x = n·ln 2 + r with n an integer and |r| ≤ ln 2 / 2 (ln 2 in two parts, so that
/// n·ln 2 is exact enough); eʳ is Cephes' minimax polynomial for `expf`; 2ⁿ is built in the
/// exponent bits. x is clamped to where 2ⁿ stays a normal float: below it eˣ < 1.2e-38, which
/// beside the row's largest score (whose exponential is 1) is nothing.
#[inline(always)]
pub(super) fn exp(x: f32) -> f32 {
    const LOG2_E: f32 = std::f32::consts::LOG2_E;
    const LN2_HIGH: f32 = 0.693_359_4;
    const LN2_LOW: f32 = -2.121_944_4e-4;
    // 1.5·2²³: adding it rounds to an integer, kept in the low bits of the mantissa.
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 88.0);
    let shifted = x * LOG2_E + ROUND;
    let n = shifted - ROUND;
    let r = x - n * LN2_HIGH - n * LN2_LOW;
    let p = 1.987_569_1e-4_f32;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 0.5;
    let e_r = p * r * r + r + 1.0;
    // The integer n sits in the mantissa's low bits of `shifted`; moved into the exponent field
    // with the bias of 127, it is 2ⁿ.
    let n_bits = shifted.to_bits().wrapping_sub(ROUND.to_bits());
    let two_n = f32::from_bits(n_bits.wrapping_add(127) << 23);
    e_r * two_n
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};

    use super::*;

    #[test]
    fn exp_is_within_two_units_in_the_last_place_of_the_standard_one() {
        let mut worst = 0.0_f64;
        for i in 0..=1_000_000 {
            let x = -87.0 + 175.0 * (i as f32 / 1_000_000.0);
            let want = f64::from(x).exp();
            let relative = (f64::from(exp(x)) - want).abs() / want;
            worst = worst.max(relative);
        }
        assert!(worst < 2.5e-7, "largest relative error {worst}");
        assert_eq!(exp(0.0), 1.0);
        assert!(exp(-1000.0) < 1e-37 && exp(-1000.0) >= 0.0);
    }

    #[test]
    fn masked_softmax_gives_the_softmax_of_the_real_keys_and_zero_to_padding() {
        // Two inputs, one head, three tokens: the second input has one padded token.
        let scores: Vec<f32> =
            vec![1.0, 2.0, 3.0, 0.5, -1.0, 4.0, 0.0, 0.0, 0.0, 2.0, 1.0, 50.0, -3.0, 3.0, 99.0, 7.0, 7.0, 7.0];
        let tensor = Tensor::from_vec(scores.clone(), (2, 1, 3, 3), &Device::Cpu).unwrap();
        tensor.inplace_op1(&MaskedSoftmax { lengths: &[3, 2] }).unwrap();
        let got = tensor.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let softmax = |row: &[f32]| -> Vec<f32> {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let e: Vec<f32> = row.iter().map(|x| (x - max).exp()).collect();
            let sum: f32 = e.iter().sum();
            e.iter().map(|x| x / sum).collect()
        };
        for (index, row) in scores.chunks(3).enumerate() {
            let length = if index < 3 { 3 } else { 2 };
            let mut want = softmax(&row[..length]);
            want.resize(3, 0.0);
            for (g, w) in got[index * 3..index * 3 + 3].iter().zip(&want) {
                assert!((g - w).abs() < 1e-6, "row {index}: {:?} instead of {want:?}", &got[index * 3..index * 3 + 3]);
            }
        }
    }

    #[test]
    fn layer_norm_is_candles() {
        let (rows, width) = (5, 21);
        let values: Vec<f32> = (0..rows * width).map(|i| ((i * 7919 % 1000) as f32 / 100.0 - 5.0).powi(3)).collect();
        let weight: Vec<f32> = (0..width).map(|i| 0.5 + i as f32 / 10.0).collect();
        let bias: Vec<f32> = (0..width).map(|i| i as f32 / 7.0 - 1.0).collect();
        let x = Tensor::from_vec(values.clone(), (rows, width), &Device::Cpu).unwrap();
        let (w, b) = (
            Tensor::new(weight.as_slice(), &Device::Cpu).unwrap(),
            Tensor::new(bias.as_slice(), &Device::Cpu).unwrap(),
        );
        let want =
            candle_nn::ops::layer_norm(&x, &w, &b, 1e-12).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        x.inplace_op1(&LayerNorm { weight: &weight, bias: &bias, eps: 1e-12 }).unwrap();
        let got = x.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() < 1e-5, "{g} instead of {w}");
        }
        assert!(x.inplace_op1(&LayerNorm { weight: &weight[1..], bias: &bias[1..], eps: 1e-12 }).is_err());
    }

    #[test]
    fn the_largest_magnitude_is_found_in_every_lane_and_the_tail() {
        let mut values = vec![0.5_f32; 19];
        assert_eq!(largest_magnitude(&values), 0.5);
        for at in [0, 7, 8, 15, 16, 18] {
            let mut with = values.clone();
            with[at] = -3.0;
            assert_eq!(largest_magnitude(&with), 3.0, "at {at}");
        }
        values[3] = f32::NAN;
        assert_eq!(largest_magnitude(&values), 0.5);
        assert_eq!(largest_magnitude(&[]), 0.0);
    }

    #[test]
    fn masked_softmax_refuses_lengths_that_do_not_fit() {
        let tensor = Tensor::zeros((2, 1, 3, 3), candle_core::DType::F32, &Device::Cpu).unwrap();
        assert!(tensor.inplace_op1(&MaskedSoftmax { lengths: &[3] }).is_err());
        assert!(tensor.inplace_op1(&MaskedSoftmax { lengths: &[3, 4] }).is_err());
    }

    #[test]
    fn bias_steps_add_the_bias_to_every_row() {
        let x = Tensor::from_vec(vec![1.0_f32, 2.0, 3.0, 4.0], (2, 2), &Device::Cpu).unwrap();
        let bias = Tensor::from_vec(vec![10.0_f32, 20.0], 2, &Device::Cpu).unwrap();
        x.inplace_op2(&bias, &AddBias).unwrap();
        assert_eq!(x.to_vec2::<f32>().unwrap(), [[11.0, 22.0], [13.0, 24.0]]);
        let residual = Tensor::from_vec(vec![0.5_f32, 0.25, 1.0, 2.0], (2, 2), &Device::Cpu).unwrap();
        x.inplace_op3(&bias, &residual, &AddBiasResidual).unwrap();
        assert_eq!(x.to_vec2::<f32>().unwrap(), [[21.5, 42.25], [24.0, 46.0]]);
        let y = Tensor::from_vec(vec![-1.0_f32, 0.0], (1, 2), &Device::Cpu).unwrap();
        y.inplace_op2(&Tensor::from_vec(vec![1.0_f32, 1.0], 2, &Device::Cpu).unwrap(), &AddBiasGelu).unwrap();
        let got = y.to_vec2::<f32>().unwrap();
        assert_eq!(got[0][0], 0.0);
        assert!((got[0][1] - 0.841_344_7).abs() < 1e-6, "gelu(1) = {}", got[0][1]);
        let wrong = Tensor::from_vec(vec![1.0_f32, 2.0, 3.0], 3, &Device::Cpu).unwrap();
        assert!(x.inplace_op2(&wrong, &AddBias).is_err());
    }
}

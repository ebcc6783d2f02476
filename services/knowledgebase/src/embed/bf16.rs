//! The linear layers' products in bfloat16, on CPUs that multiply it natively (AVX512_BF16:
//! AMD Zen 4 and later, Intel Cooper Lake and Sapphire Rapids and later), for passages to store.
//!
//! After `fused.rs`, the f32 products were 80 % of a passage's time and ran at about 85 % of
//! the cores' f32 peak (gemm's AVX-512 kernel): the arithmetic itself was what was left.
//! `VDPBF16PS` multiplies pairs of bfloat16 values and adds them to f32 sums: twice the products
//! of an f32 multiply-add per instruction. Inputs and weights are rounded to bfloat16 (8 bits of
//! mantissa), the sums stay f32; the vectors of a passage then differ from the f32 ones by a
//! cosine distance under 1e-3 (tested), which moves no ranking measurably (BENCHMARKS.md,
//! issue 43). Queries keep the f32 products: they are short, and someone waits for each.

/// A weight `[inputs, outputs]` in the layout the kernel reads: panels of 16 output columns;
/// within a panel, for each pair of input rows (2q, 2q + 1), 16 words each holding the two
/// weights of one column as bfloat16, the first in the low half. So one 64-byte load gives
/// `VDPBF16PS` the pairs of 16 columns.
pub(super) struct Bf16Weight {
    packed: Vec<u32>,
    inputs: usize,
    outputs: usize,
}

/// Output columns in a panel: one 512-bit register of f32 sums.
const PANEL: usize = 16;

/// Whether this CPU runs the kernel.
pub(super) fn supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// f32 to bfloat16 bits, rounding to nearest even (what `VCVTNE2PS2BF16` does for finite
/// values).
#[inline(always)]
fn bf16_bits(x: f32) -> u32 {
    let bits = x.to_bits();
    bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) >> 16
}

#[inline(always)]
fn pair(low: f32, high: f32) -> u32 {
    bf16_bits(low) | (bf16_bits(high) << 16)
}

impl Bf16Weight {
    /// `weight` is `[inputs, outputs]`, row-major. `None` where the kernel cannot run it: a CPU
    /// without AVX512_BF16, an odd number of inputs, or outputs that are not whole panels.
    pub(super) fn pack(weight: &[f32], inputs: usize, outputs: usize) -> Option<Self> {
        if !supported()
            || !inputs.is_multiple_of(2)
            || !outputs.is_multiple_of(PANEL)
            || weight.len() != inputs * outputs
        {
            return None;
        }
        let pairs = inputs / 2;
        let mut packed = Vec::with_capacity(pairs * outputs);
        for panel in 0..outputs / PANEL {
            for q in 0..pairs {
                let (even, odd) = (&weight[2 * q * outputs..], &weight[(2 * q + 1) * outputs..]);
                for column in panel * PANEL..(panel + 1) * PANEL {
                    packed.push(pair(even[column], odd[column]));
                }
            }
        }
        Some(Self { packed, inputs, outputs })
    }

    pub(super) fn outputs(&self) -> usize {
        self.outputs
    }

    /// `x · W` for `x` of `rows` rows of `inputs` values: `rows · outputs` values, row-major.
    pub(super) fn matmul(&self, x: &[f32], rows: usize) -> anyhow::Result<Vec<f32>> {
        anyhow::ensure!(
            x.len() == rows * self.inputs,
            "{} values are not {rows} rows of {} inputs",
            x.len(),
            self.inputs
        );
        let pairs = self.inputs / 2;
        let a: Vec<u32> = x.chunks_exact(2).map(|two| pair(two[0], two[1])).collect();
        let mut out = vec![0.0_f32; rows * self.outputs];
        #[cfg(target_arch = "x86_64")]
        {
            anyhow::ensure!(supported(), "this CPU has no AVX512_BF16");
            let panels = self.outputs / PANEL;
            let panel_words = pairs * PANEL;
            // Three panels at a time (48 columns) over every row: their weights, up to 147 KB
            // for the widest layer, stay in the core's L2 while the rows stream past.
            let mut first = 0;
            while first < panels {
                let width = (panels - first).min(3);
                let weights = &self.packed[first * panel_words..(first + width) * panel_words];
                let mut row = 0;
                while row < rows {
                    let height = match rows - row {
                        8.. => 8,
                        4..=7 => 4,
                        2 | 3 => 2,
                        _ => 1,
                    };
                    let tile = Tile {
                        a: &a[row * pairs..(row + height) * pairs],
                        pairs,
                        weights,
                        out: &mut out[row * self.outputs..(row + height) * self.outputs],
                        out_stride: self.outputs,
                        column: first * PANEL,
                    };
                    kernel::run(tile, height, width);
                    row += height;
                }
                first += width;
            }
        }
        Ok(out)
    }
}

/// One tile of the product: `height` rows of `a` (bfloat16 pairs, `pairs` a row) times
/// `width` panels of `weights`, written to `out` from `column` on.
#[cfg(target_arch = "x86_64")]
struct Tile<'a> {
    a: &'a [u32],
    pairs: usize,
    weights: &'a [u32],
    out: &'a mut [f32],
    out_stride: usize,
    column: usize,
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod kernel {
    use std::arch::x86_64::{
        __m512, __m512bh, __m512i, _mm512_dpbf16_ps, _mm512_loadu_si512, _mm512_set1_epi32, _mm512_setzero_ps,
        _mm512_storeu_ps,
    };

    use super::{PANEL, Tile};

    /// Runs `tile` with the kernel for its shape; rows 8, 4, 2 or 1 and panels 1 to 3.
    pub(super) fn run(tile: Tile<'_>, height: usize, width: usize) {
        let pairs = tile.pairs;
        // Every access of the kernel below stays inside these bounds.
        assert!(tile.a.len() == height * pairs && tile.weights.len() == width * pairs * PANEL);
        assert!(tile.out.len() >= (height - 1) * tile.out_stride + tile.column + width * PANEL);
        assert!(super::supported());
        // SAFETY: the CPU has AVX512F and AVX512_BF16 (asserted above), and the slices hold
        // every element the kernel reads or writes (asserted above).
        unsafe {
            match (height, width) {
                (8, 3) => product::<8, 3>(tile),
                (8, 2) => product::<8, 2>(tile),
                (8, _) => product::<8, 1>(tile),
                (4, 3) => product::<4, 3>(tile),
                (4, 2) => product::<4, 2>(tile),
                (4, _) => product::<4, 1>(tile),
                (2, 3) => product::<2, 3>(tile),
                (2, 2) => product::<2, 2>(tile),
                (2, _) => product::<2, 1>(tile),
                (_, 3) => product::<1, 3>(tile),
                (_, 2) => product::<1, 2>(tile),
                (_, _) => product::<1, 1>(tile),
            }
        }
    }

    /// `ROWS × PANELS` sums in registers (at most 24 of the 32), one weight load per panel and
    /// one broadcast per row for each pair of inputs.
    ///
    /// # Safety
    /// The CPU has AVX512F and AVX512_BF16, and `tile`'s slices are as large as `run` asserts.
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn product<const ROWS: usize, const PANELS: usize>(tile: Tile<'_>) {
        let Tile { a, pairs, weights, out, out_stride, column } = tile;
        let (a, weights, out) = (a.as_ptr(), weights.as_ptr(), out.as_mut_ptr());
        let mut sums = [[_mm512_setzero_ps(); PANELS]; ROWS];
        // SAFETY: a bit pattern for a bit pattern of the same size.
        let zero = unsafe { std::mem::transmute::<__m512, __m512bh>(_mm512_setzero_ps()) };
        for q in 0..pairs {
            let mut panel = [zero; PANELS];
            for (p, value) in panel.iter_mut().enumerate() {
                // SAFETY: panel p's pair q is inside `weights` (`run`'s bounds); the load is
                // unaligned; 16 bf16 pairs are a `__m512bh`.
                *value = unsafe {
                    std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(
                        weights.add((p * pairs + q) * PANEL).cast(),
                    ))
                };
            }
            for (r, row) in sums.iter_mut().enumerate() {
                // SAFETY: row r's pair q is inside `a`; the broadcast pair is a `__m512bh`.
                let input = unsafe {
                    std::mem::transmute::<__m512i, __m512bh>(_mm512_set1_epi32(*a.add(r * pairs + q) as i32))
                };
                for (sum, &weight) in row.iter_mut().zip(&panel) {
                    *sum = _mm512_dpbf16_ps(*sum, input, weight);
                }
            }
        }
        for (r, row) in sums.iter().enumerate() {
            for (p, &sum) in row.iter().enumerate() {
                let sum: __m512 = sum;
                // SAFETY: row r's 16 columns of panel p are inside `out` (`run`'s bounds).
                unsafe { _mm512_storeu_ps(out.add(r * out_stride + column + p * PANEL), sum) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_product_is_the_f32_one_to_bfloat16_precision() {
        if !supported() {
            eprintln!("skipped: this CPU has no AVX512_BF16");
            return;
        }
        // Shapes that use every kernel: rows 8 + 4 + 2 + 1, panels 3 + 2.
        let (rows, inputs, outputs) = (15, 38, 80);
        let value = |i: usize, scale: f32| ((i * 7919 % 1000) as f32 / 500.0 - 1.0) * scale;
        let x: Vec<f32> = (0..rows * inputs).map(|i| value(i, 2.0)).collect();
        let w: Vec<f32> = (0..inputs * outputs).map(|i| value(i + 17, 0.1)).collect();
        let packed = Bf16Weight::pack(&w, inputs, outputs).expect("a supported shape");
        let got = packed.matmul(&x, rows).unwrap();
        for r in 0..rows {
            for c in 0..outputs {
                let exact: f32 = (0..inputs).map(|k| x[r * inputs + k] * w[k * outputs + c]).sum();
                let scale: f32 = (0..inputs).map(|k| (x[r * inputs + k] * w[k * outputs + c]).abs()).sum();
                let error = (got[r * outputs + c] - exact).abs();
                assert!(
                    error <= 2.0 * 2f32.powi(-8) * scale,
                    "row {r} column {c}: {} instead of {exact}",
                    got[r * outputs + c]
                );
            }
        }
        assert!(packed.matmul(&x[1..], rows).is_err());
    }

    #[test]
    fn shapes_the_kernel_cannot_run_are_refused() {
        assert!(Bf16Weight::pack(&[0.0; 3 * 16], 3, 16).is_none());
        assert!(Bf16Weight::pack(&[0.0; 2 * 8], 2, 8).is_none());
        assert!(Bf16Weight::pack(&[0.0; 5], 2, 16).is_none());
    }

    #[test]
    fn rounding_to_bfloat16_is_to_nearest_even() {
        assert_eq!(bf16_bits(1.0), 0x3f80);
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to the even one, 1.
        assert_eq!(bf16_bits(1.0 + 2f32.powi(-8)), 0x3f80);
        assert_eq!(bf16_bits(1.0 + 3.0 * 2f32.powi(-8)), 0x3f82);
        assert_eq!(bf16_bits(-2.0), 0xc000);
    }
}

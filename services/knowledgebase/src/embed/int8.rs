//! The linear layers' products in 8-bit integers, for CPUs without AVX512_BF16: AVX2 alone
//! (AMD Zen 2 and 3, Intel's client cores before Alder Lake) and the VNNI ones.
//!
//! On such a CPU the f32 products ran at half the width of the AVX-512 machine the encoder was
//! tuned on, and were most of a passage's time (issue 57). Here each weight column is rounded
//! to integers in [-127, 127] with a scale of its own (per output channel), once, when the model
//! loads; each row of a layer's input is rounded the same way with its own scale when the layer
//! runs; the integer products are exact 32-bit sums, and the scales turn them back into f32.
//! The bias, GELU, residuals, layer norms and the attention's softmax stay f32 (`fused.rs`).
//!
//! The kernels:
//! - AVX2: `VPMADDWD` multiplies 16-bit integers and adds pairs into 32 bits: the 8-bit values
//!   widened, each weight word holding two inputs of one column. The first version used
//!   `VPMADDUBSW` on the bytes themselves, whose pairs saturate at 16 bits unless the input's
//!   sign is first moved onto the weight (`VPSIGNB`, a third instruction per product). The words
//!   need no such step and cannot saturate; measured end to end, the two ran at the same speed.
//! - VNNI (AVX-VNNI, or AVX512_VNNI with AVX512VL): `VPDPBUSD` multiplies and adds four bytes
//!   into 32 bits at once, with no 16-bit step. Its unsigned side is the input plus 128; the
//!   weight column's sum times 128 comes off at the end.
//! - Portable: the same sums in plain Rust, so that the path runs (and is tested) on any CPU.
//!
//! All three give the same integers, so the same vectors; only their speed differs.

use anyhow::bail;

use super::fused::largest_magnitude;

/// Output columns in a panel: eight 32-bit sums, one 256-bit register.
const PANEL: usize = 8;
/// Inputs a weight word holds: four bytes, what `VPDPBUSD` (and `VPMADDUBSW` then `VPMADDWD`)
/// sums into one 32-bit lane.
const QUAD: usize = 4;
/// Rows of the input kept while every panel of the weight goes past: 64 rows of the widest input
/// (1,536 bytes) are 96 KB, which stay in a core's L2.
const ROW_BLOCK: usize = 64;

/// The code that multiplies the integers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kernel {
    Portable,
    Avx2,
    AvxVnni,
    Avx512Vnni,
}

impl Kernel {
    /// The fastest kernel this CPU runs; `None` where that would be the portable one, which is
    /// slower than f32 products.
    pub(super) fn detect() -> Option<Self> {
        [Kernel::AvxVnni, Kernel::Avx512Vnni, Kernel::Avx2].into_iter().find(|kernel| kernel.supported())
    }

    pub(super) fn supported(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            match self {
                Kernel::Portable => true,
                Kernel::Avx2 => has!("avx2"),
                Kernel::AvxVnni => has!("avx2") && has!("avxvnni"),
                Kernel::Avx512Vnni => has!("avx2") && has!("avx512vnni") && has!("avx512vl"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self == Kernel::Portable
        }
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Kernel::Portable => "portable",
            Kernel::Avx2 => "avx2",
            Kernel::AvxVnni => "avx-vnni",
            Kernel::Avx512Vnni => "avx512-vnni",
        }
    }
}

/// A weight `[inputs, outputs]` rounded per output column, in the layout its kernel reads: one
/// 256-bit load holds a group of inputs (four bytes, or two 16-bit words) for 8 columns.
pub(super) struct Int8Weight {
    /// The VNNI and portable kernels' layout (empty for AVX2's): panels of [`PANEL`] columns;
    /// within a panel, for each group of four inputs, the four bytes of each column side by side
    /// (32 bytes a group).
    packed: Vec<i8>,
    /// AVX2's: panels of [`PANEL`] columns; within a panel, for each pair of inputs, the two
    /// values of each column side by side as 16-bit words (32 bytes a pair).
    words: Vec<i16>,
    /// Per output column: what one unit of its integers is worth.
    scales: Vec<f32>,
    /// Per output column: the sum of its integers, for the VNNI kernels' offset.
    sums: Vec<i32>,
    inputs: usize,
    outputs: usize,
    kernel: Kernel,
}

/// Rounds `values` to integers in [-127, 127] with one scale, the largest magnitude's; returns
/// the scale (0 for values that are all zero, whose integers are all 0).
///
/// Written so that the compiler vectorizes it on the baseline x86-64 target: `f32::round_ties_even`
/// there is a call to libm's `rintf` per value, which took a quarter of a passage's time, and a
/// maximum in one chain a tenth.
fn quantize(values: &[f32], out: &mut [i8]) -> f32 {
    let largest = largest_magnitude(values);
    if largest == 0.0 || !largest.is_finite() {
        out.fill(0);
        return if largest == 0.0 { 0.0 } else { f32::NAN };
    }
    let inverse = 127.0 / largest;
    // Adding 1.5 · 2^23 to a float below 2^22 in magnitude rounds it to the nearest integer,
    // ties to even (what `round_ties_even` does): the sum's bits are then those of 1.5 · 2^23
    // plus that integer. Integer operations only, where a float-to-integer `as` is a scalar
    // conversion with saturation per value.
    const ROUND: f32 = 12_582_912.0;
    for (slot, value) in out.iter_mut().zip(values) {
        let integer = (value * inverse + ROUND).to_bits().wrapping_sub(ROUND.to_bits()) as i32;
        // In [-127, 127]: the largest magnitude maps to 127.
        *slot = integer as i8;
    }
    largest / 127.0
}

impl Int8Weight {
    /// `weight` is `[inputs, outputs]`, row-major. `None` where the kernels cannot run it: inputs
    /// that are not whole groups of four, or outputs that are not whole panels.
    pub(super) fn pack(weight: &[f32], inputs: usize, outputs: usize, kernel: Kernel) -> Option<Self> {
        if inputs == 0
            || !inputs.is_multiple_of(QUAD)
            || !outputs.is_multiple_of(PANEL)
            || weight.len() != inputs * outputs
            || !kernel.supported()
        {
            return None;
        }
        let mut columns = vec![0_i8; inputs * outputs];
        let mut scales = Vec::with_capacity(outputs);
        let mut sums = Vec::with_capacity(outputs);
        let mut values = Vec::with_capacity(inputs);
        for column in 0..outputs {
            values.clear();
            values.extend((0..inputs).map(|k| weight[k * outputs + column]));
            let rounded = &mut columns[column * inputs..(column + 1) * inputs];
            scales.push(quantize(&values, rounded));
            sums.push(rounded.iter().map(|&q| i32::from(q)).sum());
        }
        // Where each group of `width` inputs of a column starts, in the kernels' order: panel by
        // panel, group by group, column by column.
        let groups = |width: usize| {
            (0..outputs / PANEL).flat_map(move |panel| {
                (0..inputs / width).flat_map(move |group| {
                    (panel * PANEL..(panel + 1) * PANEL).map(move |column| column * inputs + group * width)
                })
            })
        };
        let (mut packed, mut words) = (Vec::new(), Vec::new());
        if kernel == Kernel::Avx2 {
            words = groups(2).flat_map(|start| columns[start..start + 2].iter().map(|&v| i16::from(v))).collect();
        } else {
            packed = groups(QUAD).flat_map(|start| columns[start..start + QUAD].iter().copied()).collect();
        }
        Some(Self { packed, words, scales, sums, inputs, outputs, kernel })
    }

    pub(super) fn outputs(&self) -> usize {
        self.outputs
    }

    /// `x · W` for `x` of `rows` rows of `inputs` values: `rows · outputs` values, row-major.
    pub(super) fn matmul(&self, x: &[f32], rows: usize) -> anyhow::Result<Vec<f32>> {
        if x.len() != rows * self.inputs {
            bail!("{} values are not {rows} rows of {} inputs", x.len(), self.inputs);
        }
        let mut a = vec![0_i8; rows * self.inputs];
        let mut row_scales = Vec::with_capacity(rows);
        for (row, rounded) in x.chunks_exact(self.inputs).zip(a.chunks_exact_mut(self.inputs)) {
            row_scales.push(quantize(row, rounded));
        }
        // AVX2 multiplies 16-bit words: the same values, widened.
        let words: Vec<i16> =
            if self.kernel == Kernel::Avx2 { a.iter().map(|&v| i16::from(v)).collect() } else { Vec::new() };
        let mut out = vec![0.0_f32; rows * self.outputs];
        let mut first = 0;
        while first < rows {
            let block = (rows - first).min(ROW_BLOCK);
            let span = first * self.inputs..(first + block) * self.inputs;
            let input = Rows {
                values: &a[span.clone()],
                words: words.get(span).unwrap_or_default(),
                scales: &row_scales[first..first + block],
            };
            let out = &mut out[first * self.outputs..(first + block) * self.outputs];
            match self.kernel {
                Kernel::Portable => portable(self, &input, out),
                #[cfg(target_arch = "x86_64")]
                kernel => simd::run(self, &input, out, kernel),
                #[cfg(not(target_arch = "x86_64"))]
                _ => bail!("the {} kernel runs on x86-64 only", self.kernel.name()),
            }
            first += block;
        }
        Ok(out)
    }
}

/// Rows of a layer's input, rounded, with their scales.
struct Rows<'a> {
    values: &'a [i8],
    /// The values widened to 16 bits, for AVX2; empty for the other kernels.
    words: &'a [i16],
    scales: &'a [f32],
}

/// The sums one column at a time, reading the packed layout as the SIMD kernels do.
fn portable(weight: &Int8Weight, input: &Rows<'_>, out: &mut [f32]) {
    let (inputs, outputs) = (weight.inputs, weight.outputs);
    let quads = inputs / QUAD;
    for (r, row) in input.values.chunks_exact(inputs).enumerate() {
        for column in 0..outputs {
            let (panel, lane) = (column / PANEL, column % PANEL);
            let mut sum = 0_i32;
            for quad in 0..quads {
                let word = ((panel * quads + quad) * PANEL + lane) * QUAD;
                for k in 0..QUAD {
                    sum += i32::from(row[quad * QUAD + k]) * i32::from(weight.packed[word + k]);
                }
            }
            // In the SIMD kernels' order, so that the numbers are the same to the last bit.
            out[r * outputs + column] = sum as f32 * (weight.scales[column] * input.scales[r]);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod simd {
    use std::arch::x86_64::{
        __m256i, _mm256_add_epi32, _mm256_cvtepi32_ps, _mm256_dpbusd_avx_epi32, _mm256_dpbusd_epi32, _mm256_loadu_ps,
        _mm256_loadu_si256, _mm256_madd_epi16, _mm256_mul_ps, _mm256_mullo_epi32, _mm256_set1_epi8, _mm256_set1_epi32,
        _mm256_set1_ps, _mm256_setzero_si256, _mm256_storeu_ps, _mm256_sub_epi32, _mm256_xor_si256,
    };

    use super::{Int8Weight, Kernel, PANEL, QUAD, Rows};

    /// One tile: `ROWS` rows of the input (from `row`) times `PANELS` panels (from `panel`).
    struct Tile<'a> {
        weight: &'a Int8Weight,
        input: &'a Rows<'a>,
        out: *mut f32,
        row: usize,
        panel: usize,
    }

    /// Calls `$kernel` instantiated for a tile of `$height` rows (1 to 4) and `$width` panels
    /// (1 or 2).
    macro_rules! by_shape {
        ($kernel:ident, $tile:expr, $height:expr, $width:expr) => {
            match ($height, $width) {
                (4, 2) => $kernel::<4, 2>($tile),
                (3, 2) => $kernel::<3, 2>($tile),
                (2, 2) => $kernel::<2, 2>($tile),
                (1, 2) => $kernel::<1, 2>($tile),
                (4, _) => $kernel::<4, 1>($tile),
                (3, _) => $kernel::<3, 1>($tile),
                (2, _) => $kernel::<2, 1>($tile),
                (_, _) => $kernel::<1, 1>($tile),
            }
        };
    }

    /// Runs every tile of `input` × `weight` with `kernel`, which the CPU must have.
    pub(super) fn run(weight: &Int8Weight, input: &Rows<'_>, out: &mut [f32], kernel: Kernel) {
        let (inputs, outputs) = (weight.inputs, weight.outputs);
        let rows = input.scales.len();
        let panels = outputs / PANEL;
        // Every access of the kernels below stays inside these bounds.
        assert!(out.len() == rows * outputs && weight.scales.len() == outputs && weight.sums.len() == outputs);
        if kernel == Kernel::Avx2 {
            assert!(input.words.len() == rows * inputs && weight.words.len() == inputs * outputs);
        } else {
            assert!(input.values.len() == rows * inputs && weight.packed.len() == inputs * outputs);
        }
        assert!(kernel.supported() && kernel != Kernel::Portable);
        let out = out.as_mut_ptr();
        let mut panel = 0;
        while panel < panels {
            let width = (panels - panel).min(2);
            let mut row = 0;
            while row < rows {
                let height = (rows - row).min(4);
                let tile = Tile { weight, input, out, row, panel };
                // SAFETY: the CPU has the kernel's features (asserted above); the tile's rows and
                // panels are inside the slices, whose sizes are asserted above.
                unsafe {
                    match kernel {
                        Kernel::Avx2 => by_shape!(avx2, tile, height, width),
                        Kernel::AvxVnni => by_shape!(avx_vnni, tile, height, width),
                        _ => by_shape!(avx512_vnni, tile, height, width),
                    }
                }
                row += height;
            }
            panel += width;
        }
    }

    /// The group of four input bytes `quad` of row `r`, in every 32-bit lane.
    ///
    /// # Safety
    /// Row `r` of the tile is inside the input.
    #[inline(always)]
    unsafe fn broadcast(tile: &Tile<'_>, r: usize, quad: usize) -> __m256i {
        let inputs = tile.weight.inputs;
        // SAFETY: the row is inside the input (the caller's promise) and the quad inside the row.
        let word = unsafe {
            tile.input.values.as_ptr().add((tile.row + r) * inputs + quad * QUAD).cast::<i32>().read_unaligned()
        };
        // SAFETY: AVX is part of every kernel's features.
        unsafe { _mm256_set1_epi32(word) }
    }

    /// Panel `p` of the tile, group `quad`.
    ///
    /// # Safety
    /// Panel `p` of the tile is inside the weight.
    #[inline(always)]
    unsafe fn weights(tile: &Tile<'_>, p: usize, quad: usize) -> __m256i {
        let quads = tile.weight.inputs / QUAD;
        // SAFETY: the panel is inside the packed weight (the caller's promise), the quad inside it.
        unsafe {
            _mm256_loadu_si256(tile.weight.packed.as_ptr().add(((tile.panel + p) * quads + quad) * PANEL * QUAD).cast())
        }
    }

    /// Scales the sums of row `r`, panel `p` into f32 and stores them.
    ///
    /// # Safety
    /// The tile's row `r` and panel `p` are inside the output.
    #[inline(always)]
    unsafe fn store(tile: &Tile<'_>, r: usize, p: usize, sums: __m256i) {
        let column = (tile.panel + p) * PANEL;
        // SAFETY: the columns and the row are inside the scales and the output (the caller's
        // promise); AVX is part of every kernel's features.
        unsafe {
            let scales = _mm256_mul_ps(
                _mm256_loadu_ps(tile.weight.scales.as_ptr().add(column)),
                _mm256_set1_ps(tile.input.scales[tile.row + r]),
            );
            let values = _mm256_mul_ps(_mm256_cvtepi32_ps(sums), scales);
            _mm256_storeu_ps(tile.out.add((tile.row + r) * tile.weight.outputs + column), values);
        }
    }

    /// # Safety
    /// The CPU has AVX2; the tile is inside the input's and the weight's words, and the output.
    #[target_feature(enable = "avx2")]
    unsafe fn avx2<const ROWS: usize, const PANELS: usize>(tile: Tile<'_>) {
        let (inputs, pairs) = (tile.weight.inputs, tile.weight.inputs / 2);
        let (x, w) = (tile.input.words.as_ptr(), tile.weight.words.as_ptr());
        let mut sums = [[_mm256_setzero_si256(); PANELS]; ROWS];
        for pair in 0..pairs {
            let mut panel = [_mm256_setzero_si256(); PANELS];
            for (p, value) in panel.iter_mut().enumerate() {
                // SAFETY: the tile's panels are inside the weight's words (the caller's promise);
                // a pair of a panel is 8 columns of two words.
                *value = unsafe { _mm256_loadu_si256(w.add(((tile.panel + p) * pairs + pair) * PANEL * 2).cast()) };
            }
            for (r, row) in sums.iter_mut().enumerate() {
                // SAFETY: the tile's rows are inside the input's words (the caller's promise).
                let word = unsafe { x.add((tile.row + r) * inputs + 2 * pair).cast::<i32>().read_unaligned() };
                let x = _mm256_set1_epi32(word);
                for (sum, &w) in row.iter_mut().zip(&panel) {
                    *sum = _mm256_add_epi32(*sum, _mm256_madd_epi16(x, w));
                }
            }
        }
        for (r, row) in sums.iter().enumerate() {
            for (p, &sum) in row.iter().enumerate() {
                // SAFETY: the tile is inside the output (the caller's promise).
                unsafe { store(&tile, r, p, sum) };
            }
        }
    }

    /// The VNNI kernels: sums of (x + 128) · w, less 128 · Σw per column.
    macro_rules! vnni_kernel {
        ($name:ident, $features:literal, $dot:ident) => {
            /// # Safety
            /// The CPU has the features named; the tile is inside the input, weight and output.
            #[target_feature(enable = $features)]
            unsafe fn $name<const ROWS: usize, const PANELS: usize>(tile: Tile<'_>) {
                let offset = _mm256_set1_epi8(i8::MIN);
                let mut sums = [[_mm256_setzero_si256(); PANELS]; ROWS];
                for quad in 0..tile.weight.inputs / QUAD {
                    let mut panel = [_mm256_setzero_si256(); PANELS];
                    for (p, value) in panel.iter_mut().enumerate() {
                        // SAFETY: the tile's panels are inside the weight (the caller's promise).
                        *value = unsafe { weights(&tile, p, quad) };
                    }
                    for (r, row) in sums.iter_mut().enumerate() {
                        // SAFETY: the tile's rows are inside the input (the caller's promise).
                        // Flipping the top bit adds 128: x + 128 as an unsigned byte.
                        let x = _mm256_xor_si256(unsafe { broadcast(&tile, r, quad) }, offset);
                        for (sum, &w) in row.iter_mut().zip(&panel) {
                            *sum = $dot(*sum, x, w);
                        }
                    }
                }
                let times = _mm256_set1_epi32(128);
                for p in 0..PANELS {
                    let column = (tile.panel + p) * PANEL;
                    // SAFETY: the panel's columns are inside the sums (the caller's promise).
                    let offsets = _mm256_mullo_epi32(
                        unsafe { _mm256_loadu_si256(tile.weight.sums.as_ptr().add(column).cast()) },
                        times,
                    );
                    for (r, row) in sums.iter().enumerate() {
                        // SAFETY: the tile is inside the output (the caller's promise).
                        unsafe { store(&tile, r, p, _mm256_sub_epi32(row[p], offsets)) };
                    }
                }
            }
        };
    }

    vnni_kernel!(avx_vnni, "avx2,avxvnni", _mm256_dpbusd_avx_epi32);
    vnni_kernel!(avx512_vnni, "avx2,avx512vnni,avx512vl", _mm256_dpbusd_epi32);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(i: usize, scale: f32) -> f32 {
        ((i * 7919 % 1000) as f32 / 500.0 - 1.0) * scale
    }

    /// Shapes that use every tile: rows 64 + 4 + 3 (two row blocks), panels 2 + 1.
    const SHAPE: (usize, usize, usize) = (71, 36, 24);

    fn operands() -> (Vec<f32>, Vec<f32>) {
        let (rows, inputs, outputs) = SHAPE;
        let mut x: Vec<f32> = (0..rows * inputs).map(|i| value(i, 2.0)).collect();
        // A row of zeros and a row with one large value: the scales' edge cases.
        x[..inputs].fill(0.0);
        x[inputs + 5] = 40.0;
        let w: Vec<f32> = (0..inputs * outputs).map(|i| value(i + 17, 0.1)).collect();
        (x, w)
    }

    #[test]
    fn the_product_is_the_f32_one_to_8_bit_precision() {
        let (rows, inputs, outputs) = SHAPE;
        let (x, w) = operands();
        let packed = Int8Weight::pack(&w, inputs, outputs, Kernel::Portable).expect("a supported shape");
        let got = packed.matmul(&x, rows).unwrap();
        for r in 0..rows {
            let row = &x[r * inputs..(r + 1) * inputs];
            let largest_x = row.iter().fold(0.0_f32, |m, v| m.max(v.abs()));
            for c in 0..outputs {
                let exact: f32 = (0..inputs).map(|k| row[k] * w[k * outputs + c]).sum();
                let largest_w = (0..inputs).fold(0.0_f32, |m, k| m.max(w[k * outputs + c].abs()));
                // Each factor is off by at most half a step: |x|·Δw + |w|·Δx + Δx·Δw per term.
                let (dx, dw) = (largest_x / 254.0, largest_w / 254.0);
                let bound = inputs as f32 * (largest_x * dw + largest_w * dx + dx * dw) * 1.001;
                let error = (got[r * outputs + c] - exact).abs();
                assert!(error <= bound, "row {r} column {c}: {} instead of {exact}", got[r * outputs + c]);
            }
        }
        assert!(got[..outputs].iter().all(|&v| v == 0.0), "a row of zeros gives zeros");
        assert!(packed.matmul(&x[1..], rows).is_err());
    }

    /// Every kernel this CPU has gives exactly the portable kernel's numbers: the integer sums are
    /// exact, so the kernel picked by feature detection changes no vector.
    #[test]
    fn every_kernel_this_cpu_has_gives_the_portable_numbers() {
        let (rows, inputs, outputs) = SHAPE;
        let (x, w) = operands();
        let expected = Int8Weight::pack(&w, inputs, outputs, Kernel::Portable).unwrap().matmul(&x, rows).unwrap();
        let mut ran = Vec::new();
        for kernel in [Kernel::Avx2, Kernel::AvxVnni, Kernel::Avx512Vnni] {
            let Some(packed) = Int8Weight::pack(&w, inputs, outputs, kernel) else {
                assert!(!kernel.supported(), "{} is supported but packing refused", kernel.name());
                continue;
            };
            assert_eq!(packed.matmul(&x, rows).unwrap(), expected, "the {} kernel", kernel.name());
            ran.push(kernel.name());
        }
        eprintln!("kernels compared with the portable one: {ran:?}");
        // The largest products the kernels meet, -127 · -127 in every term: no kernel's
        // intermediate sums may saturate or wrap.
        let extreme_w = vec![-1.0_f32; inputs * outputs];
        let extreme_x = vec![-1.0_f32; inputs];
        let portable = Int8Weight::pack(&extreme_w, inputs, outputs, Kernel::Portable).unwrap();
        let expected = portable.matmul(&extreme_x, 1).unwrap();
        assert!(expected.iter().all(|&v| (v - inputs as f32).abs() < 1e-3), "{expected:?}");
        for kernel in [Kernel::Avx2, Kernel::AvxVnni, Kernel::Avx512Vnni].into_iter().filter(|k| k.supported()) {
            let packed = Int8Weight::pack(&extreme_w, inputs, outputs, kernel).unwrap();
            assert_eq!(packed.matmul(&extreme_x, 1).unwrap(), expected, "the {} kernel", kernel.name());
        }
    }

    #[test]
    fn detection_picks_a_kernel_the_cpu_has() {
        match Kernel::detect() {
            Some(kernel) => {
                assert!(kernel.supported());
                assert_ne!(kernel, Kernel::Portable);
                // VNNI is preferred to plain AVX2 wherever the CPU has it.
                if Kernel::AvxVnni.supported() || Kernel::Avx512Vnni.supported() {
                    assert_ne!(kernel, Kernel::Avx2);
                }
            }
            None => assert!(!Kernel::Avx2.supported()),
        }
        assert!(Kernel::Portable.supported());
    }

    #[test]
    fn shapes_the_kernels_cannot_run_are_refused() {
        assert!(Int8Weight::pack(&[0.0; 3 * 8], 3, 8, Kernel::Portable).is_none());
        assert!(Int8Weight::pack(&[0.0; 4 * 4], 4, 4, Kernel::Portable).is_none());
        assert!(Int8Weight::pack(&[0.0; 5], 4, 8, Kernel::Portable).is_none());
    }

    #[test]
    fn rounding_is_per_column_and_to_nearest_even() {
        let mut out = [0_i8; 4];
        let scale = quantize(&[1.0, -0.5, 127.0 / 254.0, 0.0], &mut out);
        assert_eq!(scale, 1.0 / 127.0);
        // 0.5 · 127 = 63.5 rounds to the even 64.
        assert_eq!(out, [127, -64, 64, 0]);
        assert_eq!(quantize(&[0.0, 0.0], &mut out[..2]), 0.0);
        // 2.5 · (127 / 127) rounds to the even 2, 3.5 to 4, -2.5 to -2.
        let mut ties = [0_i8; 4];
        quantize(&[2.5, 3.5, -2.5, 127.0], &mut ties);
        assert_eq!(ties, [2, 4, -2, 127]);
    }
}

//! Which arithmetic the encoder's linear layers use: what `SWITCHBOARD_ENCODER_PRODUCTS` asks
//! for, or by default the fastest this CPU has that keeps retrieval's quality (BENCHMARKS.md,
//! issues 43 and 57): integer products where the CPU has VNNI, bfloat16 where it has that
//! alone, integer products on AVX2, f32 elsewhere.

use anyhow::bail;

use super::bf16;
use super::encoder::Precision;
use super::int8::Kernel;

/// The variable that overrides the choice.
pub const VARIABLE: &str = "SWITCHBOARD_ENCODER_PRODUCTS";

/// The products of one loaded model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Products {
    pub precision: Precision,
    /// The integer kernel, for [`Precision::Int8`].
    pub int8: Option<Kernel>,
}

impl Products {
    /// `value` is the variable's: `auto` (or unset, or empty), `f32`, `bf16`, `int8` (the best
    /// integer kernel this CPU has, the portable one where it has none), or one integer kernel by
    /// name: `int8-avx2`, `int8-avx-vnni`, `int8-avx512-vnni`, `int8-portable`. A choice the CPU
    /// cannot run is an error, not a silent fallback.
    pub(super) fn choose(value: Option<&str>) -> anyhow::Result<Self> {
        let int8 = |kernel: Kernel| Self { precision: Precision::Int8, int8: Some(kernel) };
        let value = value.map(str::trim).unwrap_or_default().to_ascii_lowercase();
        let chosen = match value.as_str() {
            "" | "auto" => match Kernel::detect() {
                // VNNI's integer products are the fastest wherever the CPU has them, bfloat16 CPUs
                // included (Intel Xeon, 2 cores: 58 passages a second against bfloat16's 33 and
                // f32's 48), and retrieval keeps its quality (SciFact nDCG@10 0.7237 against
                // 0.7242-0.7248; BENCHMARKS.md, issue 57).
                Some(kernel @ (Kernel::AvxVnni | Kernel::Avx512Vnni)) => int8(kernel),
                // bfloat16 on a CPU that has it without VNNI (none is known): closer to f32.
                _ if bf16::supported() => Self { precision: Precision::Bf16, int8: None },
                Some(kernel) => int8(kernel),
                None => Self { precision: Precision::F32, int8: None },
            },
            "f32" => Self { precision: Precision::F32, int8: None },
            "bf16" if bf16::supported() => Self { precision: Precision::Bf16, int8: None },
            "bf16" => bail!("{VARIABLE}=bf16: this CPU has no AVX512_BF16"),
            "int8" => int8(Kernel::detect().unwrap_or(Kernel::Portable)),
            named => {
                let kernel = [Kernel::Avx2, Kernel::AvxVnni, Kernel::Avx512Vnni, Kernel::Portable]
                    .into_iter()
                    .find(|kernel| named.strip_prefix("int8-") == Some(kernel.name()));
                match kernel {
                    Some(kernel) if kernel.supported() => int8(kernel),
                    Some(kernel) => bail!("{VARIABLE}={named}: this CPU cannot run the {} kernel", kernel.name()),
                    None => bail!(
                        "{VARIABLE}={named:?} is not one of auto, f32, bf16, int8, int8-avx2, int8-avx-vnni, \
                         int8-avx512-vnni, int8-portable"
                    ),
                }
            }
        };
        Ok(chosen)
    }

    /// As said in logs and benchmarks: `f32`, `bf16`, `int8 (avx2)`.
    pub(super) fn name(&self) -> String {
        match (self.precision, self.int8) {
            (Precision::F32, _) => "f32".to_owned(),
            (Precision::Bf16, _) => "bf16".to_owned(),
            (Precision::Int8, Some(kernel)) => format!("int8 ({})", kernel.name()),
            (Precision::Int8, None) => "int8".to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_vnni_then_bfloat16_then_avx2_then_f32_as_the_cpu_allows() {
        let chosen = Products::choose(None).unwrap();
        assert_eq!(Products::choose(Some(" Auto ")).unwrap(), chosen);
        let vnni = Kernel::AvxVnni.supported() || Kernel::Avx512Vnni.supported();
        let expected = if vnni {
            Precision::Int8
        } else if bf16::supported() {
            Precision::Bf16
        } else if Kernel::Avx2.supported() {
            Precision::Int8
        } else {
            Precision::F32
        };
        assert_eq!(chosen.precision, expected, "chose {}", chosen.name());
        if expected == Precision::Int8 {
            assert_eq!(chosen.int8, Kernel::detect());
        }
    }

    #[test]
    fn int8_is_forced_on_any_cpu_and_a_kernel_by_name_only_where_it_runs() {
        let forced = Products::choose(Some("int8")).unwrap();
        assert_eq!(forced.precision, Precision::Int8);
        assert_eq!(forced.int8, Some(Kernel::detect().unwrap_or(Kernel::Portable)));
        assert_eq!(Products::choose(Some("int8-portable")).unwrap().int8, Some(Kernel::Portable));
        for kernel in [Kernel::Avx2, Kernel::AvxVnni, Kernel::Avx512Vnni] {
            let named = Products::choose(Some(&format!("int8-{}", kernel.name())));
            assert_eq!(named.is_ok(), kernel.supported(), "{}", kernel.name());
        }
        assert_eq!(Products::choose(Some("f32")).unwrap().precision, Precision::F32);
        assert_eq!(Products::choose(Some("bf16")).is_ok(), bf16::supported());
        let error = Products::choose(Some("int4")).unwrap_err().to_string();
        assert!(error.contains("int4") && error.contains("int8-avx2"), "{error}");
    }
}

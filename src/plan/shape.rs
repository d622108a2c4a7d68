//! Model shapes of the LLaMA family, their exact parameter counts, and the documented rule that
//! turns a target size into a shape.
//!
//! Counting follows what PyTorch's `sum(p.numel() for p in model.parameters())` gives for the
//! architecture (tied weights counted once): token embedding V·d; per block two RMSNorm weights
//! (2·d), attention q and o (d·n_heads·h each), k and v (d·n_kv_heads·h each), SwiGLU gate, up
//! and down (3·d·d_ff); a final RMSNorm (d); an untied output head V·d. No biases; RoPE has no
//! parameters. The non-embedding count N (what scaling laws use) excludes the embedding and head.

use serde::{Deserialize, Serialize};

/// A concrete decoder-only transformer shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ModelShape {
    /// Width of the residual stream.
    pub d_model: u64,
    /// Number of transformer blocks.
    pub n_layers: u64,
    /// Query heads.
    pub n_heads: u64,
    /// Key/value heads (grouped-query attention when fewer than `n_heads`).
    pub n_kv_heads: u64,
    /// SwiGLU hidden width.
    pub d_ff: u64,
    /// Vocabulary size.
    pub vocab: u64,
    /// Whether the output head shares the token embedding's weights.
    pub tie_embeddings: bool,
}

/// Parameter counts of a shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamCount {
    /// Every parameter, tied weights once.
    pub total: u64,
    /// Without token embedding and output head: the N of scaling laws.
    pub non_embedding: u64,
    /// The token embedding (V·d).
    pub embedding: u64,
    /// The output head (V·d when untied, else 0).
    pub head: u64,
}

/// The largest value any single dimension may take.
const MAX_DIM: u64 = 1 << 24;

impl ModelShape {
    /// Width of one attention head.
    pub fn head_dim(&self) -> u64 {
        self.d_model / self.n_heads.max(1)
    }

    /// Checks that the shape can be built: positive dimensions, heads dividing the width,
    /// key/value heads dividing the query heads, an even head width (RoPE rotates pairs).
    pub fn validate(&self) -> Result<(), String> {
        let dims = [
            ("d_model", self.d_model),
            ("n_layers", self.n_layers),
            ("n_heads", self.n_heads),
            ("n_kv_heads", self.n_kv_heads),
            ("d_ff", self.d_ff),
        ];
        for (key, value) in dims {
            if value == 0 || value > MAX_DIM {
                return Err(format!("`{key}` = `{value}` must lie in [1, {MAX_DIM}]"));
            }
        }
        if self.vocab < 2 || self.vocab > u32::MAX as u64 {
            return Err(format!("`vocab` = `{}` must lie in [2, 2^32)", self.vocab));
        }
        if !self.d_model.is_multiple_of(self.n_heads) {
            return Err(format!(
                "`d_model` = `{}` is not divisible by `n_heads` = `{}`",
                self.d_model, self.n_heads
            ));
        }
        if !self.n_heads.is_multiple_of(self.n_kv_heads) {
            return Err(format!(
                "`n_heads` = `{}` is not divisible by `n_kv_heads` = `{}`",
                self.n_heads, self.n_kv_heads
            ));
        }
        if !self.head_dim().is_multiple_of(2) {
            return Err(format!(
                "head width d_model / n_heads = `{}` must be even for rotary embeddings",
                self.head_dim()
            ));
        }
        Ok(())
    }

    /// Exact parameter counts (see the module docs for what is counted).
    pub fn params(&self) -> ParamCount {
        let (d, l, v) = (
            self.d_model as u128,
            self.n_layers as u128,
            self.vocab as u128,
        );
        let h = self.head_dim() as u128;
        let q_o = 2 * d * (self.n_heads as u128 * h);
        let k_v = 2 * d * (self.n_kv_heads as u128 * h);
        let mlp = 3 * d * self.d_ff as u128;
        let norms = 2 * d;
        let non_embedding = l * (q_o + k_v + mlp + norms) + d;
        let embedding = v * d;
        let head = if self.tie_embeddings { 0 } else { v * d };
        let clamp = |x: u128| u64::try_from(x).unwrap_or(u64::MAX);
        ParamCount {
            total: clamp(non_embedding + embedding + head),
            non_embedding: clamp(non_embedding),
            embedding: clamp(embedding),
            head: clamp(head),
        }
    }

    /// `8L·d512·h8` style summary.
    pub fn summary(&self) -> String {
        let gqa = if self.n_kv_heads != self.n_heads {
            format!("/kv{}", self.n_kv_heads)
        } else {
            String::new()
        };
        format!(
            "{}L d{} h{}{} ff{}",
            self.n_layers, self.d_model, self.n_heads, gqa, self.d_ff
        )
    }
}

/// The rule that derives a shape from a target non-embedding size.
///
/// 1. Head width: `head_dim` if given, else 64 for d_model ≥ 512, 32 for d_model ≥ 128 when it
///    divides d_model, else 16.
/// 2. d_ff: the multiple of `ffn_multiple` at or above ⌊8·d_model/3⌋ (LLaMA's rule).
/// 3. Key/value heads: n_heads / `kv_groups`.
/// 4. Candidates: d_model a multiple of 16 (and of the head width) up to 65,536, n_layers 1–256.
///    For each depth, the width whose N is nearest the target. Among depths whose N is within
///    15 % of the target (or, if none is, the nearest), the lowest score
///    |ln(aspect / aspect_ratio)| + 4·|ln(N / target)| wins: a shape close to the aspect ratio,
///    trading 1 % of size for about 4 % of aspect (tiny models are coarse; large ones hit both).
///
/// The shape's real count is reported next to the target; the laws use the real count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShapeRule {
    /// Target d_model / n_layers.
    pub aspect_ratio: f64,
    /// Fixed head width, or `None` for the default ladder.
    pub head_dim: Option<u64>,
    /// Query heads per key/value head.
    pub kv_groups: u64,
    /// d_ff is rounded up to a multiple of this.
    pub ffn_multiple: u64,
    /// Tie embedding and head.
    pub tie_embeddings: bool,
    /// Vocabulary.
    pub vocab: u64,
}

const MAX_LAYERS: u64 = 256;
const MAX_WIDTH: u64 = 65_536;
const WIDTH_STEP: u64 = 16;
const SIZE_TOLERANCE: f64 = 0.15;
const SIZE_WEIGHT: f64 = 4.0;

impl ShapeRule {
    fn head_dim_for(&self, d_model: u64) -> u64 {
        match self.head_dim {
            Some(h) => h,
            None if d_model >= 512 => 64,
            None if d_model >= 128 && d_model.is_multiple_of(32) => 32,
            None => 16,
        }
    }

    /// The shape this rule gives for width `d_model` and depth `n_layers`, if valid.
    pub fn shape(&self, d_model: u64, n_layers: u64) -> Option<ModelShape> {
        let head_dim = self.head_dim_for(d_model);
        if head_dim == 0 || !d_model.is_multiple_of(head_dim) {
            return None;
        }
        let n_heads = d_model / head_dim;
        if self.kv_groups == 0 || !n_heads.is_multiple_of(self.kv_groups) {
            return None;
        }
        let multiple = self.ffn_multiple.max(1);
        let d_ff = (8 * d_model / 3).div_ceil(multiple) * multiple;
        let shape = ModelShape {
            d_model,
            n_layers,
            n_heads,
            n_kv_heads: n_heads / self.kv_groups,
            d_ff,
            vocab: self.vocab,
            tie_embeddings: self.tie_embeddings,
        };
        shape.validate().ok().map(|_| shape)
    }

    /// Derives the shape for a target non-embedding size (see the type docs for the rule).
    pub fn derive(&self, target: u64) -> Result<ModelShape, String> {
        let widths: Vec<u64> = (1..=MAX_WIDTH / WIDTH_STEP)
            .map(|i| i * WIDTH_STEP)
            .filter(|&d| self.shape(d, 1).is_some())
            .collect();
        if widths.is_empty() {
            return Err("no width satisfies `head_dim` and `kv_groups` together".into());
        }
        let log_error = |shape: &ModelShape| {
            (shape.params().non_embedding as f64 / target as f64)
                .ln()
                .abs()
        };
        let candidates: Vec<(ModelShape, f64)> = (1..=MAX_LAYERS)
            .filter_map(|layers| self.nearest_width(&widths, layers, target))
            .map(|s| {
                let e = log_error(&s);
                (s, e)
            })
            .collect();
        let best_error = candidates.iter().map(|c| c.1).fold(f64::INFINITY, f64::min);
        let smallest = self
            .shape(widths[0], 1)
            .map(|s| s.params().non_embedding)
            .unwrap_or(0);
        let largest = self
            .shape(widths[widths.len() - 1], MAX_LAYERS)
            .map(|s| s.params().non_embedding)
            .unwrap_or(u64::MAX);
        if target < smallest / 2 {
            return Err(format!(
                "target size `{target}` is below the smallest shape this rule builds ({smallest} non-embedding parameters)"
            ));
        }
        if target > largest.saturating_mul(2) {
            return Err(format!(
                "target size `{target}` is beyond the largest shape this rule builds ({largest})"
            ));
        }
        let tolerance = (1.0 + SIZE_TOLERANCE).ln().max(best_error);
        let aspect_error = |s: &ModelShape| {
            ((s.d_model as f64 / s.n_layers as f64) / self.aspect_ratio)
                .ln()
                .abs()
        };
        candidates
            .into_iter()
            .filter(|(_, e)| *e <= tolerance + 1e-12)
            .min_by(|a, b| {
                let score = |c: &(ModelShape, f64)| aspect_error(&c.0) + SIZE_WEIGHT * c.1;
                score(a).total_cmp(&score(b))
            })
            .map(|(s, _)| s)
            .ok_or_else(|| format!("no shape found for target size `{target}`"))
    }

    /// For a fixed depth, the valid width whose non-embedding count is nearest `target`.
    fn nearest_width(&self, widths: &[u64], layers: u64, target: u64) -> Option<ModelShape> {
        let count = |d: u64| {
            self.shape(d, layers)
                .map_or(u64::MAX, |s| s.params().non_embedding)
        };
        let index = widths.partition_point(|&d| count(d) < target);
        let mut options = Vec::new();
        for i in [index.saturating_sub(1), index] {
            if let Some(&d) = widths.get(i)
                && let Some(s) = self.shape(d, layers)
            {
                options.push(s);
            }
        }
        options.into_iter().min_by(|a, b| {
            let ea = (a.params().non_embedding as f64 / target as f64).ln().abs();
            let eb = (b.params().non_embedding as f64 / target as f64).ln().abs();
            ea.total_cmp(&eb)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(d: u64, l: u64, h: u64, kv: u64, ff: u64, v: u64, tie: bool) -> ModelShape {
        ModelShape {
            d_model: d,
            n_layers: l,
            n_heads: h,
            n_kv_heads: kv,
            d_ff: ff,
            vocab: v,
            tie_embeddings: tie,
        }
    }

    // Reference totals are the published `sum(p.numel())` of the Hugging Face checkpoints.

    #[test]
    fn tinyllama_1_1b_untied_gqa() {
        let p = shape(2048, 22, 32, 4, 5632, 32000, false).params();
        assert_eq!(p.total, 1_100_048_384);
        assert_eq!(p.embedding, 65_536_000);
        assert_eq!(p.head, 65_536_000);
        assert_eq!(p.non_embedding, 1_100_048_384 - 2 * 65_536_000);
    }

    #[test]
    fn llama2_7b_untied_mha() {
        assert_eq!(
            shape(4096, 32, 32, 32, 11008, 32000, false).params().total,
            6_738_415_616
        );
    }

    #[test]
    fn llama3_8b_untied_gqa() {
        assert_eq!(
            shape(4096, 32, 32, 8, 14336, 128_256, false).params().total,
            8_030_261_248
        );
    }

    #[test]
    fn smollm_135m_tied_gqa() {
        let p = shape(576, 30, 9, 3, 1536, 49152, true).params();
        assert_eq!(p.total, 134_515_008);
        assert_eq!(p.head, 0);
    }

    #[test]
    fn tiny_shape_counted_by_hand() {
        // d=64, 2 layers, 4 heads (h=16), 2 kv heads, d_ff=176, V=256, untied:
        // per block: q,o 2·64·64 = 8192; k,v 2·64·32 = 4096; mlp 3·64·176 = 33792; norms 128
        // = 46208; ×2 = 92416; + final norm 64 = 92480; embedding 16384; head 16384.
        let p = shape(64, 2, 4, 2, 176, 256, false).params();
        assert_eq!(p.non_embedding, 92_480);
        assert_eq!(p.total, 92_480 + 2 * 16_384);
    }

    #[test]
    fn invalid_shapes_are_refused() {
        assert!(shape(100, 2, 3, 3, 64, 256, true).validate().is_err()); // 100 % 3
        assert!(shape(96, 2, 4, 3, 64, 256, true).validate().is_err()); // 4 % 3
        assert!(shape(60, 2, 4, 4, 64, 256, true).validate().is_err()); // head 15 odd
        assert!(shape(64, 0, 4, 4, 64, 256, true).validate().is_err());
        assert!(shape(64, 2, 4, 4, 64, 1, true).validate().is_err());
    }

    fn rule() -> ShapeRule {
        ShapeRule {
            aspect_ratio: 32.0,
            head_dim: None,
            kv_groups: 1,
            ffn_multiple: 32,
            tie_embeddings: true,
            vocab: 256,
        }
    }

    #[test]
    fn derived_shapes_land_near_target_with_the_aspect_ratio() {
        for target in [
            50_000u64,
            100_000,
            200_000,
            1_000_000,
            4_000_000,
            32_000_000,
            1_000_000_000,
        ] {
            let s = rule().derive(target).unwrap();
            let n = s.params().non_embedding as f64;
            let size_error = (n / target as f64 - 1.0).abs();
            let aspect = s.d_model as f64 / s.n_layers as f64;
            assert!(size_error < 0.15, "{target}: {s:?} has {n}");
            assert!(
                (aspect / 32.0).ln().abs() < 0.5,
                "{target}: aspect {aspect}"
            );
            if target >= 100_000_000 {
                assert!(size_error < 0.02, "{target}: {s:?} has {n}");
            }
            if target >= 1_000_000 {
                // widths move in steps of 16, so a few-million-parameter model can miss by ~7 %
                assert!(size_error < 0.08, "{target}: {s:?} has {n}");
                assert!(
                    (aspect / 32.0).ln().abs() < 0.25,
                    "{target}: aspect {aspect}"
                );
            }
            s.validate().unwrap();
        }
    }

    #[test]
    fn derived_sizes_grow_with_target() {
        let sizes: Vec<u64> = [1e5, 3e5, 1e6, 3e6, 1e7]
            .iter()
            .map(|&t| rule().derive(t as u64).unwrap().params().non_embedding)
            .collect();
        assert!(sizes.windows(2).all(|w| w[0] < w[1]), "{sizes:?}");
    }

    #[test]
    fn impossible_targets_are_refused() {
        assert!(rule().derive(10).is_err());
        assert!(rule().derive(1_000_000_000_000_000).is_err());
        let zero_groups = ShapeRule {
            kv_groups: 0,
            ..rule()
        };
        assert!(zero_groups.derive(1_000_000).is_err());
    }

    #[test]
    fn fixed_head_width_and_groups_are_respected() {
        let odd = ShapeRule {
            head_dim: Some(24),
            kv_groups: 5,
            ..rule()
        };
        let s = odd.derive(1_000_000).unwrap();
        assert_eq!(s.head_dim(), 24);
        assert_eq!(s.n_heads, 5 * s.n_kv_heads);
    }
}

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

/// The rule that derives a shape from a target non-embedding size: one smooth family in which
/// width and depth grow together.
///
/// 1. Widths: d_model from 16 in steps of 8 up to 128, of 16 up to 512, of 64 up to 4,096 and of
///    128 beyond (each step at most 25 % wider), valid for the head width and `kv_groups`.
/// 2. Head width: `head_dim` if given, else the largest of 64 (from d_model 512), 32 (from 128),
///    16 and 8 that divides d_model. Key/value heads: n_heads / `kv_groups`.
/// 3. d_ff: 8/3 · d_model rounded up to a multiple of `ffn_multiple` (default: 8 below d_model
///    256, 32 below 2,048, else 128), as in LLaMA.
/// 4. The family is a chain of (d_model, n_layers) from (16, 2): each link widens by one width
///    step or deepens by one layer, whichever keeps d_model / n_layers nearer `aspect_ratio`. So
///    neither width nor depth ever shrinks as models grow, no model is narrower than 16 or
///    shallower than 2 layers.
/// 5. A target takes the link whose N is nearest it (of the two that bracket it). If that N is
///    more than `SIZE_TOLERANCE` (10 %) off, d_ff is moved within [2, 5] · d_model (in steps
///    of the d_ff multiple) to bring N nearest the target (needed only at the smallest sizes,
///    where one width step is a large change); a target that still misses by more
///    than 10 % (below the smallest model, or with a coarse `head_dim` / `kv_groups`) is refused.
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
    /// d_ff is a multiple of this (`None`: 8, 32 or 128 by width).
    pub ffn_multiple: Option<u64>,
    /// Tie embedding and head.
    pub tie_embeddings: bool,
    /// Vocabulary.
    pub vocab: u64,
}

const MAX_LAYERS: u64 = 256;
const MAX_WIDTH: u64 = 65_536;
/// The narrowest and shallowest derived model.
pub const MIN_WIDTH: u64 = 16;
/// See [`MIN_WIDTH`].
pub const MIN_LAYERS: u64 = 2;
/// How far a derived model's N may be from its target (relative).
pub const SIZE_TOLERANCE: f64 = 0.10;

impl ShapeRule {
    fn head_dim_for(&self, d_model: u64) -> u64 {
        match self.head_dim {
            Some(h) => h,
            None => [64, 32, 16, 8]
                .into_iter()
                .find(|&h| {
                    let from = match h {
                        64 => 512,
                        32 => 128,
                        _ => 0,
                    };
                    d_model >= from && d_model.is_multiple_of(h)
                })
                .unwrap_or(8),
        }
    }

    fn ff_multiple(&self, d_model: u64) -> u64 {
        self.ffn_multiple.unwrap_or(match d_model {
            0..256 => 8,
            256..2048 => 32,
            _ => 128,
        })
    }

    /// The shape this rule gives for width `d_model` and depth `n_layers` with the standard
    /// d_ff, if valid.
    pub fn shape(&self, d_model: u64, n_layers: u64) -> Option<ModelShape> {
        let m = self.ff_multiple(d_model).max(1);
        self.shape_with_ff(d_model, n_layers, (8 * d_model).div_ceil(3).div_ceil(m) * m)
    }

    fn shape_with_ff(&self, d_model: u64, n_layers: u64, d_ff: u64) -> Option<ModelShape> {
        let head_dim = self.head_dim_for(d_model);
        if head_dim == 0 || !d_model.is_multiple_of(head_dim) {
            return None;
        }
        let n_heads = d_model / head_dim;
        if self.kv_groups == 0 || !n_heads.is_multiple_of(self.kv_groups) {
            return None;
        }
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

    /// The next valid width above `d_model`, if any.
    fn next_width(&self, d_model: u64) -> Option<u64> {
        let step = |d: u64| match d {
            0..128 => 8,
            128..512 => 16,
            512..4096 => 64,
            _ => 128,
        };
        let mut d = d_model;
        loop {
            d = (d / step(d) + 1) * step(d);
            if d > MAX_WIDTH {
                return None;
            }
            if self.shape(d, MIN_LAYERS).is_some() {
                return Some(d);
            }
        }
    }

    /// The family's chain of shapes (standard d_ff), smallest first.
    pub fn chain(&self) -> Vec<ModelShape> {
        let first = match self.shape(MIN_WIDTH, MIN_LAYERS) {
            Some(_) => Some(MIN_WIDTH),
            None => self.next_width(MIN_WIDTH),
        };
        let Some(mut d) = first else {
            return Vec::new();
        };
        let mut layers = MIN_LAYERS;
        let mut chain = Vec::new();
        let off = |d: u64, l: u64| ((d as f64 / l as f64) / self.aspect_ratio).ln().abs();
        loop {
            if let Some(s) = self.shape(d, layers) {
                chain.push(s);
            }
            let wider = self.next_width(d);
            let deeper = (layers < MAX_LAYERS).then_some(layers + 1);
            match (wider, deeper) {
                (Some(w), Some(l)) if off(w, layers) < off(d, l) => d = w,
                (_, Some(l)) => layers = l,
                (Some(w), None) => d = w,
                (None, None) => return chain,
            }
            if wider.is_none() && layers == MAX_LAYERS {
                return chain;
            }
        }
    }

    /// Derives the shape for a target non-embedding size (see the type docs for the rule).
    pub fn derive(&self, target: u64) -> Result<ModelShape, String> {
        if self.kv_groups == 0 {
            return Err("`kv_groups` must be at least 1".into());
        }
        let chain = self.chain();
        let (Some(first), Some(last)) = (chain.first(), chain.last()) else {
            return Err("no width satisfies `head_dim` and `kv_groups` together".into());
        };
        let n = |s: &ModelShape| s.params().non_embedding;
        let error = |s: &ModelShape| (n(s) as f64 / target.max(1) as f64).ln().abs();
        let index = chain.partition_point(|s| n(s) < target);
        let bracket: Vec<&ModelShape> = [index.checked_sub(1), Some(index)]
            .into_iter()
            .flatten()
            .filter_map(|i| chain.get(i))
            .collect();
        let tolerance = (1.0 + SIZE_TOLERANCE).ln();
        // Within the tolerance, the shape whose d_ff strays least from the standard 8/3 ratio;
        // failing that, the nearest in size (refused below).
        let standard_ff =
            |s: &ModelShape| self.shape(s.d_model, s.n_layers).map_or(s.d_ff, |t| t.d_ff);
        let distortion = |s: &ModelShape| (s.d_ff as f64 / standard_ff(s) as f64).ln().abs();
        let candidates: Vec<ModelShape> = bracket
            .iter()
            .flat_map(|&&s| [Some(s), self.tuned(&s, target)])
            .flatten()
            .collect();
        let fitting = candidates
            .iter()
            .filter(|s| error(s) <= tolerance + 1e-12)
            .min_by(|a, b| {
                distortion(a)
                    .total_cmp(&distortion(b))
                    .then(error(a).total_cmp(&error(b)))
            });
        let nearest = candidates
            .iter()
            .min_by(|a, b| error(a).total_cmp(&error(b)));
        let shape = *fitting
            .or(nearest)
            .ok_or_else(|| format!("no shape found for target size `{target}`"))?;
        if error(&shape) <= tolerance + 1e-12 {
            return Ok(shape);
        }
        Err(if target < n(first) {
            format!(
                "target size `{target}` is below the smallest shape this rule builds ({} non-embedding parameters: {})",
                n(first),
                first.summary()
            )
        } else if target > n(last) {
            format!(
                "target size `{target}` is beyond the largest shape this rule builds ({})",
                n(last)
            )
        } else {
            format!(
                "no shape within {:.0} % of target size `{target}` with this `head_dim` and `kv_groups` (nearest: {}, {} non-embedding parameters)",
                100.0 * SIZE_TOLERANCE,
                shape.summary(),
                n(&shape)
            )
        })
    }

    /// `shape` with d_ff moved within [2, 5] · d_model to bring N nearest `target`.
    fn tuned(&self, shape: &ModelShape, target: u64) -> Option<ModelShape> {
        let (d, layers) = (shape.d_model, shape.n_layers);
        let m = self.ff_multiple(d).max(1);
        ((2 * d).div_ceil(m)..=(5 * d / m))
            .filter_map(|k| self.shape_with_ff(d, layers, k * m))
            .min_by(|a, b| {
                let e = |s: &ModelShape| {
                    (s.params().non_embedding as f64 / target.max(1) as f64)
                        .ln()
                        .abs()
                };
                e(a).total_cmp(&e(b))
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
            ffn_multiple: None,
            tie_embeddings: true,
            vocab: 256,
        }
    }

    /// Targets from the smallest model to 100B, 24 per decade.
    fn targets() -> impl Iterator<Item = u64> {
        (0..=24 * 7).map(|i| (6_000.0 * 10f64.powf(i as f64 / 24.0)) as u64)
    }

    #[test]
    fn every_target_is_met_within_the_tolerance() {
        for target in targets() {
            let s = rule().derive(target).unwrap();
            let n = s.params().non_embedding as f64;
            assert!(
                (n / target as f64 - 1.0).abs() <= SIZE_TOLERANCE + 1e-9,
                "{target}: {} has {n}",
                s.summary()
            );
            s.validate().unwrap();
            assert!(s.d_ff >= 2 * s.d_model && s.d_ff <= 5 * s.d_model, "{s:?}");
        }
    }

    /// "10K" became 8,272 parameters, the same model as "8K"; "20K" was 5 layers of width 16
    /// while "25K" was 1 layer of width 48.
    #[test]
    fn width_and_depth_never_shrink_as_targets_grow() {
        let shapes: Vec<ModelShape> = targets().map(|t| rule().derive(t).unwrap()).collect();
        for pair in shapes.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            assert!(
                b.d_model >= a.d_model && b.n_layers >= a.n_layers,
                "{} then {}",
                a.summary(),
                b.summary()
            );
            assert!(b.params().non_embedding >= a.params().non_embedding);
            assert!(a.d_model >= MIN_WIDTH && a.n_layers >= MIN_LAYERS);
        }
        let n = |t: u64| rule().derive(t).unwrap();
        assert_ne!(n(8_000), n(10_000));
        assert!(n(20_000).n_layers <= n(25_000).n_layers);
        assert!(n(20_000).d_model <= n(25_000).d_model);
    }

    #[test]
    fn large_models_keep_the_aspect_ratio() {
        for target in [1_000_000u64, 32_000_000, 1_000_000_000, 10_000_000_000] {
            let s = rule().derive(target).unwrap();
            let aspect = s.d_model as f64 / s.n_layers as f64;
            assert!(
                (aspect / 32.0).ln().abs() < 0.3,
                "{target}: {}",
                s.summary()
            );
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
        let err = rule().derive(3_000).unwrap_err();
        assert!(
            err.contains("smallest shape") && err.contains("2L d16"),
            "{err}"
        );
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

//! The built-in synthetic corpus: an endless, seeded token stream whose true entropy rate is
//! known exactly, so a model's held-out loss can be compared with the best loss possible.
//!
//! # The language
//!
//! Token ids `0..4` are the markers of four *sources*, id `4` is the `COPY` marker and the
//! remaining `vocab − 5` ids are the regular tokens. The stream is a sequence of documents;
//! a document is its source's marker (the source drawn uniformly) followed by regular tokens
//! and copy events. Before each token of a document (outside a copy) one of three things
//! happens:
//!
//! * the document ends (probability 1/128, only once it holds at least 16 regular tokens,
//!   and always once it holds 2048): the next token is the marker of the next document;
//! * a copy event starts (probability 0.02, only once the document holds at least 32 regular
//!   tokens): `COPY` is emitted, then the 8 regular tokens that start at a uniformly drawn
//!   earlier position `j` of the document (`j + 8 ≤` the document's length) are repeated;
//! * otherwise the source's Markov chain emits one regular token.
//!
//! Source `s` (`0..4`) is a Markov chain of order `1 + s`. Its context is the previous
//! regular token of the document plus the *classes* of the `s` tokens before it (each regular
//! token belongs to one of 8 classes, drawn by hashing); positions before the document's
//! start read as a padding token with a class of its own. A context has `m` distinct
//! candidate next tokens (`m` = 16, 24, 32, 32 for sources 0–3, at most half the regular
//! vocabulary) with Zipf weights `1/(r + 1)^a` by rank `r` (`a` = 1.2, 1.1, 1.1, 1.1). The
//! candidate of rank `r` is found by hashing the context truncated to `1 + (r mod order)`
//! items, probing to the next unused token on a collision, so no table of size
//! `vocab^order` is stored and the candidates of a context are distinct (their
//! probabilities are exactly the Zipf weights). The most probable ranks `0, order, 2·order, …`
//! depend on the previous token alone, through a hash shared by all four sources (a common
//! "grammar" that small models learn first), and the other ranks on longer, source-specific
//! contexts: a back-off structure, as in natural text. Full-token contexts of order ≥ 3 would
//! have `vocab^3` or more contexts, unlearnable by any model of a few million parameters;
//! class contexts give `(vocab − 5) · 8^s` of them (about 250, 2K, 16K and 128K for vocabulary
//! 256), a ladder that keeps larger models improving. The copy events reward in-context
//! retrieval (induction heads), which small models lack.
//!
//! For vocabulary 256 (seed 0) the entropy rate is about 2.39 nats/token and the unigram
//! entropy about 5.48 nats (measured on 5M tokens). In the quick start (1M tokens) a 50K model
//! reaches about 4.2 nats and a 400K model about 4.0: there is a long way down for models that
//! grow and train longer.
//!
//! # Why the reported entropy is exact
//!
//! The history fixes the generator's state: the last marker gives the source and the
//! document's tokens (and so its length, the Markov context and the probabilities of ending
//! and copying), and a `COPY` marker is always followed by exactly 8 copied tokens.
//! The only hidden variable is the start of an ongoing copy; the generator tracks its exact
//! posterior (uniform over the starts consistent with the tokens copied so far), so the
//! distribution it reports for a copied token is the predictive distribution given the
//! history. The three outcomes use disjoint token ids (markers, `COPY`, regular), so the
//! entropy of the mixture is `H(p_end, p_copy, p_chain) + p_end·ln 4 + p_chain·H(Zipf)` with
//! no overlap terms. Every token is sampled from exactly the distribution whose entropy and
//! `−ln p` are added up (up to `f64` rounding, about 1e-16 relative), so no model of any size
//! or context length has an expected cross-entropy below the reported entropy rate.
//!
//! # Randomness
//!
//! Everything is hand-written so the stream never changes with a dependency's version: the
//! world is a function of `SyntheticSpec::seed` through the SplitMix64 finaliser used as a
//! hash, and sampling uses xoshiro256** seeded with SplitMix64 from the stream seed and the
//! world seed. Integers in `0..n` are drawn as the high half of a 128-bit product and
//! uniforms in `[0, 1)` from the top 53 bits of one output.

/// Number of sources (and of source marker ids, `0..SOURCES`).
const SOURCES: u32 = 4;
/// Token id of the copy marker.
const COPY: u32 = SOURCES;
/// First regular token id.
const FIRST_REGULAR: u32 = SOURCES + 1;
/// Number of token classes used by the Markov contexts.
const CLASSES: u32 = 8;
/// Length of a copied span.
const SPAN: usize = 8;
/// Regular tokens a document holds before it may end.
const MIN_DOC: usize = 16;
/// Regular tokens a document holds before a copy event may start.
const COPY_MIN_DOC: usize = 32;
/// Regular tokens after which a document always ends (a copy in progress finishes first).
const MAX_DOC: usize = 2048;
/// Probability that a document ends before a token (between [`MIN_DOC`] and [`MAX_DOC`]).
const P_END: f64 = 1.0 / 128.0;
/// Probability that a copy event starts before a token (from [`COPY_MIN_DOC`] on).
const P_COPY: f64 = 0.02;
/// Smallest vocabulary accepted.
const MIN_VOCAB: u32 = 32;
/// Largest vocabulary accepted (per-stream scratch arrays are as long as the vocabulary).
const MAX_VOCAB: u32 = 1 << 24;

/// Shape of one source's Markov chain.
#[derive(Debug, Clone, Copy, PartialEq)]
struct SourceShape {
    /// Order: the context is the previous token and the classes of `order − 1` before it.
    order: usize,
    /// Candidate next tokens per context (capped at half the regular vocabulary).
    candidates: usize,
    /// Zipf exponent of the candidates' weights.
    exponent: f64,
}

/// The four sources, by marker id: orders 1–4, candidates and Zipf exponents.
const SHAPES: [SourceShape; SOURCES as usize] = [
    SourceShape::new(1, 16, 1.2),
    SourceShape::new(2, 24, 1.1),
    SourceShape::new(3, 32, 1.1),
    SourceShape::new(4, 32, 1.1),
];

impl SourceShape {
    const fn new(order: usize, candidates: usize, exponent: f64) -> SourceShape {
        SourceShape {
            order,
            candidates,
            exponent,
        }
    }
}

/// Longest source order (the size of the context-hash arrays).
const MAX_ORDER: usize = 4;
const _: () = {
    let mut s = 0;
    while s < SHAPES.len() {
        assert!(SHAPES[s].order >= 1 && SHAPES[s].order <= MAX_ORDER);
        s += 1;
    }
};
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
const WORLD_SALT: u64 = 0x005E_ED0F_5157_E3D1;
const CLASS_SALT: u64 = 0x000C_1A55_E50F_70C3;
const STREAM_SALT: u64 = 0x57_4EA3_5A3D_1E55;
/// Number of document regimes (see [`regime`]).
const REGIMES: usize = 4;

/// Parameters of the synthetic world.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SyntheticSpec {
    /// Vocabulary size (must be at least 32; token ids are `0..vocab`).
    pub vocab: u32,
    /// Seed of the world (the sources' transition tables): the same seed is the same language.
    pub seed: u64,
    /// How many sources documents are drawn from (1–4): sources `0..sources`, of orders
    /// `1..=sources`.
    ///
    /// Fewer sources make a world small models can learn almost to its entropy rate (one source: a
    /// bigram chain), where a fitted irreducible loss can be checked.
    pub sources: u32,
    /// Whether copy events happen (they reward in-context retrieval, which small models lack).
    pub copies: bool,
}

impl SyntheticSpec {
    /// The default world of vocabulary `vocab` and seed `seed`: all four sources, with copies.
    pub fn new(vocab: u32, seed: u64) -> SyntheticSpec {
        SyntheticSpec {
            vocab,
            seed,
            sources: SOURCES,
            copies: true,
        }
    }

    /// The world a run's data asks for: `sources` and `copies` as a run config records them
    /// (absent: the default, all four sources with copies).
    pub fn with_world(vocab: u32, seed: u64, sources: Option<u32>, copies: Option<bool>) -> Self {
        SyntheticSpec {
            sources: sources.unwrap_or(SOURCES),
            copies: copies.unwrap_or(true),
            ..SyntheticSpec::new(vocab, seed)
        }
    }

    /// What sets a reduced world apart, for descriptions: `", 1 source(s), no copies"`; empty
    /// for the default world.
    pub fn world_note(&self) -> String {
        let sources = if self.sources == SOURCES {
            String::new()
        } else {
            format!(", {} source(s)", self.sources)
        };
        let copies = if self.copies { "" } else { ", no copies" };
        format!("{sources}{copies}")
    }

    /// The same for corpus keys (caches, stores): `"-sources1-nocopy"`; empty for the default
    /// world, so its key (and every cache and store keyed on it) is unchanged.
    pub fn key_suffix(&self) -> String {
        let sources = if self.sources == SOURCES {
            String::new()
        } else {
            format!("-sources{}", self.sources)
        };
        let copies = if self.copies { "" } else { "-nocopy" };
        format!("{sources}{copies}")
    }
}

/// Tokens of one generated stream and their exact information content.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Generated {
    /// The tokens, each `< vocab`.
    pub tokens: Vec<u32>,
    /// Σ over tokens of the entropy (nats) of the true next-token distribution given the full history.
    pub entropy_sum_nats: f64,
    /// Σ over tokens of −ln p_true(token | full history).
    pub nll_sum_nats: f64,
}

/// Probabilities of one document regime for one source, with their information content.
#[derive(Debug, Clone, Copy)]
struct Mixture {
    /// Probability that the document ends (the next token is a marker).
    p_end: f64,
    /// `p_end` plus the probability that a copy starts.
    p_end_or_copy: f64,
    /// Entropy (nats) of the whole next-token distribution.
    entropy: f64,
    /// −ln of the probability of one particular marker.
    nll_marker: f64,
    /// −ln of the probability of `COPY`.
    nll_copy: f64,
    /// −ln of the probability that the chain emits (add the rank's own −ln p).
    nll_chain: f64,
}

/// One source's chain: its Zipf table and the mixtures of the document regimes.
#[derive(Debug, Clone)]
struct Source {
    order: usize,
    salt: u64,
    /// Cumulative Zipf probabilities by rank.
    cdf: Vec<f64>,
    /// −ln of the Zipf probability by rank.
    rank_nll: Vec<f64>,
    mixtures: [Mixture; REGIMES],
}

/// The synthetic corpus: a fixed world from which any number of streams can be drawn.
#[derive(Debug, Clone)]
pub(crate) struct SyntheticCorpus {
    spec: SyntheticSpec,
    /// Number of regular tokens.
    regular: u32,
    /// Class of each regular token.
    classes: Vec<u8>,
    /// Salt of the previous-token level, shared by every source: the "grammar" all sources
    /// have in common, so pooled bigram statistics are informative and small models learn
    /// them quickly; the longer contexts are each source's own.
    shared_salt: u64,
    sources: Vec<Source>,
    /// `ln n` for `n` up to the longest document.
    ln_int: Vec<f64>,
    /// `n ln n` for `n` up to the longest document.
    n_ln_n: Vec<f64>,
}

impl SyntheticCorpus {
    /// Builds the world; errors (a lower-case message naming the value) if `vocab` < 32.
    pub fn new(spec: SyntheticSpec) -> Result<SyntheticCorpus, String> {
        if spec.vocab < MIN_VOCAB {
            return Err(format!(
                "synthetic vocab {} is too small (at least {MIN_VOCAB})",
                spec.vocab
            ));
        }
        if spec.vocab > MAX_VOCAB {
            return Err(format!(
                "synthetic vocab {} is too large (at most {MAX_VOCAB})",
                spec.vocab
            ));
        }
        if !(1..=SOURCES).contains(&spec.sources) {
            return Err(format!(
                "synthetic sources {} is out of range (1 to {SOURCES})",
                spec.sources
            ));
        }
        let regular = spec.vocab - FIRST_REGULAR;
        let world = mix64(spec.seed ^ WORLD_SALT);
        let classes = (0..regular)
            .map(|t| {
                below(
                    combine(world ^ CLASS_SALT, u64::from(t)),
                    u64::from(CLASSES),
                ) as u8
            })
            .collect();
        let sources = (0..spec.sources)
            .map(|s| {
                let salt = combine(world, u64::from(s));
                Source::new(SHAPES[s as usize], salt, regular, &spec)
            })
            .collect();
        let longest = MAX_DOC + SPAN + 1;
        let ln_int = (0..=longest).map(|n| (n as f64).ln()).collect();
        let n_ln_n = (0..=longest).map(|n| x_ln_x(n as f64)).collect();
        Ok(SyntheticCorpus {
            spec,
            regular,
            classes,
            shared_salt: combine(world, 0x5A4E_D0B1_6AA5),
            sources,
            ln_int,
            n_ln_n,
        })
    }

    /// The spec it was built from.
    #[cfg(test)]
    pub fn spec(&self) -> SyntheticSpec {
        self.spec
    }

    /// Generates the first `n` tokens of the stream whose sampling randomness comes from
    /// `stream_seed` (different stream seeds: independent samples of the same language).
    ///
    /// Generating n tokens then m more must give the same tokens as generating n + m at once (i.e.
    /// the first n tokens of a longer stream equal the shorter stream).
    pub fn generate(&self, stream_seed: u64, n: usize) -> Generated {
        let mut walker = Walker::new(self, stream_seed);
        let mut tokens = Vec::with_capacity(n);
        let (mut entropy_sum_nats, mut nll_sum_nats) = (0.0, 0.0);
        for _ in 0..n {
            let step = walker.step();
            tokens.push(step.token);
            entropy_sum_nats += step.entropy;
            nll_sum_nats += step.nll;
        }
        Generated {
            tokens,
            entropy_sum_nats,
            nll_sum_nats,
        }
    }

    /// The entropy of the unigram (token frequency) distribution in nats, estimated on a
    /// stream of `n` tokens from `stream_seed`.
    #[cfg(test)]
    pub fn unigram_entropy(&self, stream_seed: u64, n: usize) -> f64 {
        let mut counts = vec![0u64; self.spec.vocab as usize];
        let mut walker = Walker::new(self, stream_seed);
        for _ in 0..n {
            counts[walker.step().token as usize] += 1;
        }
        let total = n as f64;
        counts
            .iter()
            .filter(|&&c| c > 0)
            .map(|&c| -x_ln_x(c as f64 / total))
            .sum()
    }

    /// Fills `out` with the first `count` candidates of `source` in the context whose level
    /// hashes are `levels` (distinct regular tokens, by rank).
    fn candidates(
        &self,
        source: &Source,
        levels: &[u64; MAX_ORDER],
        count: usize,
        out: &mut Vec<u32>,
    ) {
        out.clear();
        for k in 0..count {
            let level = k % source.order;
            let hash = mix64(levels[level] ^ (k as u64 + 1).wrapping_mul(GOLDEN));
            let mut token = below(hash, u64::from(self.regular)) as u32;
            while out.contains(&token) {
                token = if token + 1 == self.regular {
                    0
                } else {
                    token + 1
                };
            }
            out.push(token);
        }
    }

    /// Hashes of the Markov context of `source` after the regular tokens `doc`, truncated to
    /// `1..=order` items (entry `i` covers the previous token and `i` classes before it).
    fn level_hashes(&self, source: &Source, doc: &[u32]) -> [u64; MAX_ORDER] {
        let len = doc.len();
        let previous = doc
            .last()
            .map_or(u64::from(self.regular), |&t| u64::from(t));
        let mut levels = [0u64; MAX_ORDER];
        levels[0] = combine(self.shared_salt, previous);
        for i in 1..source.order {
            let class = if len > i {
                u64::from(self.classes[doc[len - 1 - i] as usize])
            } else {
                u64::from(CLASSES)
            };
            levels[i] = combine(levels[i - 1] ^ source.salt, class);
        }
        levels
    }
}

impl Source {
    fn new(shape: SourceShape, salt: u64, regular: u32, spec: &SyntheticSpec) -> Source {
        let count = shape.candidates.min(regular as usize / 2).max(2);
        let weights: Vec<f64> = (0..count)
            .map(|r| ((r + 1) as f64).powf(-shape.exponent))
            .collect();
        let total: f64 = weights.iter().sum();
        let probs: Vec<f64> = weights.iter().map(|w| w / total).collect();
        let cdf = probs.iter().scan(0.0, |acc, p| {
            *acc += p;
            Some(*acc)
        });
        let rank_nll: Vec<f64> = probs.iter().map(|p| -p.ln()).collect();
        let chain_entropy = probs.iter().zip(&rank_nll).map(|(p, l)| p * l).sum();
        let mixtures = [0, 1, 2, 3].map(|r| {
            let (p_end, p_copy) = regime_probabilities(r);
            let p_copy = if spec.copies { p_copy } else { 0.0 };
            Mixture::new(p_end, p_copy, chain_entropy, spec.sources)
        });
        Source {
            order: shape.order,
            salt,
            cdf: cdf.collect(),
            rank_nll,
            mixtures,
        }
    }

    /// The rank whose cumulative probability first exceeds the uniform `u`.
    fn rank(&self, u: f64) -> usize {
        self.cdf
            .iter()
            .position(|&c| u < c)
            .unwrap_or(self.cdf.len() - 1)
    }
}

impl Mixture {
    fn new(p_end: f64, p_copy: f64, chain_entropy: f64, sources: u32) -> Mixture {
        let p_chain = 1.0 - p_end - p_copy;
        let markers = f64::from(sources);
        let entropy = -x_ln_x(p_end) + p_end * markers.ln() - x_ln_x(p_copy) - x_ln_x(p_chain)
            + p_chain * chain_entropy;
        Mixture {
            p_end,
            p_end_or_copy: p_end + p_copy,
            entropy,
            nll_marker: -(p_end / markers).ln(),
            nll_copy: -p_copy.ln(),
            nll_chain: -p_chain.ln(),
        }
    }
}

/// The regime of a document holding `len` regular tokens: 0 no end and no copy yet, 1 may
/// end, 2 may end or copy, 3 must end.
fn regime(len: usize) -> usize {
    match len {
        _ if len >= MAX_DOC => 3,
        _ if len >= COPY_MIN_DOC => 2,
        _ if len >= MIN_DOC => 1,
        _ => 0,
    }
}

/// The probabilities of ending and of copying in a regime.
fn regime_probabilities(regime: usize) -> (f64, f64) {
    match regime {
        0 => (0.0, 0.0),
        1 => (P_END, 0.0),
        2 => (P_END, P_COPY),
        _ => (1.0, 0.0),
    }
}

/// One emitted token with its entropy and −ln p under the true distribution.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Step {
    token: u32,
    entropy: f64,
    nll: f64,
}

/// An ongoing copy: the true start, and how many tokens have been copied.
#[derive(Debug, Clone, Copy)]
struct Copying {
    start: usize,
    done: usize,
}

/// The state of one stream.
#[derive(Debug)]
struct Walker<'a> {
    world: &'a SyntheticCorpus,
    rng: Xoshiro256,
    /// Current source, `None` before the first marker.
    source: Option<usize>,
    /// Regular tokens (`0..regular`) of the current document, copied ones included.
    doc: Vec<u32>,
    copying: Option<Copying>,
    /// Starts consistent with the tokens copied so far (the posterior's support).
    starts: Vec<u32>,
    /// Scratch counts by regular token, all zero between uses.
    counts: Vec<u32>,
    /// Regular tokens whose count is non-zero.
    touched: Vec<u32>,
    /// Scratch candidate list.
    candidates: Vec<u32>,
}

impl<'a> Walker<'a> {
    fn new(world: &'a SyntheticCorpus, stream_seed: u64) -> Walker<'a> {
        let seed = mix64(stream_seed ^ STREAM_SALT) ^ mix64(world.spec.seed).rotate_left(32);
        Walker {
            world,
            rng: Xoshiro256::new(seed),
            source: None,
            doc: Vec::with_capacity(MAX_DOC + SPAN),
            copying: None,
            starts: Vec::with_capacity(MAX_DOC),
            counts: vec![0; world.regular as usize],
            touched: Vec::new(),
            candidates: Vec::new(),
        }
    }

    /// Emits the next token.
    fn step(&mut self) -> Step {
        match (self.source, self.copying) {
            (None, _) => {
                let uniform = f64::from(self.world.spec.sources).ln();
                self.begin_document(uniform, uniform)
            }
            (Some(_), Some(copying)) => self.copy_step(copying),
            (Some(source), None) => self.document_step(source),
        }
    }

    /// Draws a source, emits its marker and starts an empty document.
    /// `entropy` and `nll` are those of the distribution the marker was drawn from.
    fn begin_document(&mut self, entropy: f64, nll: f64) -> Step {
        let source = self.rng.below(u64::from(self.world.spec.sources)) as u32;
        self.source = Some(source as usize);
        self.doc.clear();
        Step {
            token: source,
            entropy,
            nll,
        }
    }

    /// A step outside a copy: end the document, start a copy or emit a chain token.
    fn document_step(&mut self, source_index: usize) -> Step {
        let world = self.world;
        let source = &world.sources[source_index];
        let mixture = source.mixtures[regime(self.doc.len())];
        let u = self.rng.unit();
        if u < mixture.p_end {
            return self.begin_document(mixture.entropy, mixture.nll_marker);
        }
        if u < mixture.p_end_or_copy {
            self.begin_copy();
            return Step {
                token: COPY,
                entropy: mixture.entropy,
                nll: mixture.nll_copy,
            };
        }
        let rank = source.rank(self.rng.unit());
        let levels = world.level_hashes(source, &self.doc);
        world.candidates(source, &levels, rank + 1, &mut self.candidates);
        let token = self.candidates[rank];
        self.doc.push(token);
        Step {
            token: FIRST_REGULAR + token,
            entropy: mixture.entropy,
            nll: mixture.nll_chain + source.rank_nll[rank],
        }
    }

    /// Draws the copy's start and sets the posterior to all allowed starts.
    fn begin_copy(&mut self) {
        let allowed = self.doc.len() + 1 - SPAN;
        let start = self.rng.below(allowed as u64) as usize;
        self.starts.clear();
        self.starts.extend(0..allowed as u32);
        self.copying = Some(Copying { start, done: 0 });
    }

    /// Emits the next copied token; its distribution is that of the following token over the
    /// starts still consistent with what was copied.
    fn copy_step(&mut self, copying: Copying) -> Step {
        let offset = copying.done;
        let token = self.doc[copying.start + offset];
        let (entropy, nll) = self.filter_starts(offset, token);
        self.doc.push(token);
        let done = offset + 1;
        self.copying = if done == SPAN {
            None
        } else {
            Some(Copying { done, ..copying })
        };
        Step {
            token: FIRST_REGULAR + token,
            entropy,
            nll,
        }
    }

    /// Entropy and −ln p of `token` under the posterior predictive of the copied token at
    /// `offset`; keeps the starts that agree with `token`.
    fn filter_starts(&mut self, offset: usize, token: u32) -> (f64, f64) {
        let n = self.starts.len();
        if n == 1 {
            return (0.0, 0.0);
        }
        let mut kept = 0;
        for i in 0..n {
            let start = self.starts[i];
            let t = self.doc[start as usize + offset];
            let count = &mut self.counts[t as usize];
            if *count == 0 {
                self.touched.push(t);
            }
            *count += 1;
            if t == token {
                self.starts[kept] = start;
                kept += 1;
            }
        }
        let world = self.world;
        let mut sum = 0.0;
        for &t in &self.touched {
            sum += world.n_ln_n[self.counts[t as usize] as usize];
            self.counts[t as usize] = 0;
        }
        self.touched.clear();
        self.starts.truncate(kept);
        (
            world.ln_int[n] - sum / n as f64,
            world.ln_int[n] - world.ln_int[kept],
        )
    }
}

/// `x ln x`, with `0 ln 0 = 0`.
fn x_ln_x(x: f64) -> f64 {
    if x > 0.0 { x * x.ln() } else { 0.0 }
}

/// The SplitMix64 finaliser: a bijective 64-bit mixer.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Hash of the pair `(h, x)`.
fn combine(h: u64, x: u64) -> u64 {
    mix64(h.rotate_left(23) ^ x.wrapping_add(1).wrapping_mul(GOLDEN))
}

/// Maps a uniform 64-bit `x` to `0..n` (high half of the product).
fn below(x: u64, n: u64) -> u64 {
    ((u128::from(x) * u128::from(n)) >> 64) as u64
}

/// The xoshiro256** generator (Blackman and Vigna), seeded with SplitMix64.
#[derive(Debug, Clone)]
struct Xoshiro256 {
    s: [u64; 4],
}

impl Xoshiro256 {
    fn new(seed: u64) -> Xoshiro256 {
        let mut state = seed;
        let mut next = || {
            state = state.wrapping_add(GOLDEN);
            mix64(state)
        };
        Xoshiro256 {
            s: [next(), next(), next(), next()],
        }
    }

    fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// A uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform integer in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        below(self.next_u64(), n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn world(vocab: u32, seed: u64) -> SyntheticCorpus {
        SyntheticCorpus::new(SyntheticSpec::new(vocab, seed)).expect("valid vocabulary")
    }

    fn entropy_of(dist: &[f64]) -> f64 {
        dist.iter().map(|&p| -x_ln_x(p)).sum()
    }

    /// The true next-token distribution recomputed from the history alone (the tokens), from
    /// the rules in the module documentation: a check that the history determines the state.
    fn history_distribution(world: &SyntheticCorpus, history: &[u32]) -> Vec<f64> {
        let mut dist = vec![0.0; world.spec.vocab as usize];
        let n = world.spec.sources as usize;
        let Some(marker_at) = history.iter().rposition(|&t| t < SOURCES) else {
            dist[..n].fill(1.0 / n as f64);
            return dist;
        };
        let source = &world.sources[history[marker_at] as usize];
        let mut doc = Vec::new();
        let mut copy: Option<(usize, Vec<u32>)> = None;
        for &t in &history[marker_at + 1..] {
            if t == COPY {
                copy = Some((doc.len(), Vec::new()));
                continue;
            }
            let regular = t - FIRST_REGULAR;
            if let Some((_, copied)) = &mut copy {
                copied.push(regular);
                if copied.len() == 8 {
                    copy = None;
                }
            }
            doc.push(regular);
        }
        match copy {
            Some((len, copied)) => {
                let starts: Vec<usize> = (0..=len - 8)
                    .filter(|&j| copied.iter().enumerate().all(|(i, &c)| doc[j + i] == c))
                    .collect();
                for &j in &starts {
                    dist[(FIRST_REGULAR + doc[j + copied.len()]) as usize] +=
                        1.0 / starts.len() as f64;
                }
            }
            None => document_distribution(world, source, &doc, &mut dist),
        }
        dist
    }

    fn document_distribution(
        world: &SyntheticCorpus,
        source: &Source,
        doc: &[u32],
        dist: &mut [f64],
    ) {
        let len = doc.len();
        let p_end = if len >= 2048 {
            1.0
        } else if len >= 16 {
            1.0 / 128.0
        } else {
            0.0
        };
        let copies = world.spec.copies && (32..2048).contains(&len);
        let p_copy = if copies { 0.02 } else { 0.0 };
        let n = world.spec.sources as usize;
        dist[..n].fill(p_end / n as f64);
        dist[COPY as usize] = p_copy;
        let shape = SHAPES[source.order - 1];
        let m = shape.candidates.min(world.regular as usize / 2);
        let weights: Vec<f64> = (1..=m).map(|r| (r as f64).powf(-shape.exponent)).collect();
        let total: f64 = weights.iter().sum();
        let mut candidates = Vec::new();
        world.candidates(source, &world.level_hashes(source, doc), m, &mut candidates);
        for (&c, w) in candidates.iter().zip(&weights) {
            dist[(FIRST_REGULAR + c) as usize] += (1.0 - p_end - p_copy) * w / total;
        }
    }

    #[test]
    fn reported_distribution_is_the_one_the_history_implies() {
        let smaller = |vocab, sources, copies| {
            SyntheticCorpus::new(SyntheticSpec {
                sources,
                copies,
                ..SyntheticSpec::new(vocab, 3)
            })
            .expect("valid")
        };
        let worlds = [
            world(32, 3),
            world(256, 3),
            smaller(256, 1, false),
            smaller(64, 2, true),
        ];
        for world in worlds {
            let vocab = world.spec.vocab;
            let mut walker = Walker::new(&world, 11);
            let mut history = Vec::new();
            let mut copied_steps = 0;
            for _ in 0..30_000 {
                let dist = history_distribution(&world, &history);
                let step = walker.step();
                let p = dist[step.token as usize];
                assert!(
                    (dist.iter().sum::<f64>() - 1.0).abs() < 1e-9,
                    "vocab {vocab}: probabilities sum to 1"
                );
                assert!(
                    p > 0.0,
                    "vocab {vocab}: emitted token {} has probability 0",
                    step.token
                );
                assert!(
                    (entropy_of(&dist) - step.entropy).abs() < 1e-9,
                    "vocab {vocab}: entropy {} vs {}",
                    entropy_of(&dist),
                    step.entropy
                );
                assert!(
                    (-p.ln() - step.nll).abs() < 1e-9,
                    "vocab {vocab}: nll {} vs {}",
                    -p.ln(),
                    step.nll
                );
                copied_steps += usize::from(walker.copying.is_some());
                history.push(step.token);
            }
            if world.spec.copies {
                assert!(
                    copied_steps > 1000,
                    "vocab {vocab}: only {copied_steps} copy steps were checked"
                );
            } else {
                assert_eq!(copied_steps, 0, "a world without copies copied");
                assert!(!history.contains(&COPY));
            }
            let markers = world.spec.sources;
            assert!(
                !history.iter().any(|&t| (markers..SOURCES).contains(&t)),
                "vocab {vocab}: a marker of a source the world does not have"
            );
        }
    }

    #[test]
    fn same_seeds_give_the_same_stream_and_different_seeds_differ() {
        let a = world(256, 0);
        let first = a.generate(5, 20_000);
        assert_eq!(first, a.generate(5, 20_000));
        assert_eq!(first, world(256, 0).generate(5, 20_000));
        let other_stream = a.generate(6, 20_000);
        let other_world = world(256, 1).generate(5, 20_000);
        for other in [&other_stream, &other_world] {
            let same = first
                .tokens
                .iter()
                .zip(&other.tokens)
                .filter(|(x, y)| x == y)
                .count();
            assert!(same < 2_000, "{same} of 20000 positions agree");
        }
    }

    #[test]
    fn shorter_streams_are_prefixes_of_longer_ones() {
        let w = world(300, 9);
        let long = w.generate(1, 50_000);
        let mut previous = (0.0, 0.0);
        for n in [0, 1, 2, 17, 1_000, 25_003, 50_000] {
            let short = w.generate(1, n);
            assert_eq!(short.tokens[..], long.tokens[..n]);
            assert!(short.entropy_sum_nats >= previous.0 && short.nll_sum_nats >= previous.1);
            previous = (short.entropy_sum_nats, short.nll_sum_nats);
        }
        assert_eq!(previous, (long.entropy_sum_nats, long.nll_sum_nats));
    }

    #[test]
    fn tokens_are_in_the_vocabulary_and_all_kinds_occur() {
        for vocab in [32, 33, 256, 1_000, 50_000] {
            let g = world(vocab, 2).generate(3, 100_000);
            assert!(
                g.tokens.iter().all(|&t| t < vocab),
                "vocab {vocab}: token out of range"
            );
            assert!(g.tokens.contains(&COPY), "vocab {vocab}: no copy marker");
            for marker in 0..SOURCES {
                assert!(
                    g.tokens.contains(&marker),
                    "vocab {vocab}: no marker {marker}"
                );
            }
            let distinct = g
                .tokens
                .iter()
                .collect::<std::collections::HashSet<_>>()
                .len();
            assert!(
                distinct as u32 >= vocab.min(5_000) / 2,
                "vocab {vocab}: only {distinct} distinct tokens"
            );
            assert!(g.tokens[0] < SOURCES, "a stream starts with a marker");
        }
    }

    #[test]
    fn vocabularies_out_of_range_are_refused() {
        for vocab in [0, 5, 31] {
            let error = SyntheticCorpus::new(SyntheticSpec::new(vocab, 0)).expect_err("too small");
            assert!(
                error.contains("vocab") && error.contains(&vocab.to_string()),
                "{error}"
            );
            assert_eq!(error, error.to_lowercase());
        }
        assert!(SyntheticCorpus::new(SyntheticSpec::new(MAX_VOCAB + 1, 0)).is_err());
        let spec = SyntheticSpec::new(32, 7);
        assert_eq!(world(32, 7).spec(), spec);
        for sources in [0, 5] {
            let error =
                SyntheticCorpus::new(SyntheticSpec { sources, ..spec }).expect_err("out of range");
            assert!(error.contains(&format!("sources {sources}")), "{error}");
        }
    }

    #[test]
    fn only_a_reduced_world_changes_the_key_and_the_description() {
        let default = SyntheticSpec::with_world(256, 0, None, None);
        assert_eq!(default, SyntheticSpec::new(256, 0));
        assert_eq!(
            (default.key_suffix(), default.world_note()),
            (String::new(), String::new())
        );
        let bigram = SyntheticSpec::with_world(256, 0, Some(1), Some(false));
        assert_eq!(bigram.key_suffix(), "-sources1-nocopy");
        assert_eq!(bigram.world_note(), ", 1 source(s), no copies");
    }

    #[test]
    fn entropy_rate_is_well_below_the_unigram_entropy() {
        let w = world(256, 0);
        let n = 400_000;
        let g = w.generate(0, n);
        let rate = g.entropy_sum_nats / n as f64;
        let unigram = w.unigram_entropy(1, n);
        assert!((1.5..3.0).contains(&rate), "entropy rate {rate}");
        assert!(unigram >= 4.5, "unigram entropy {unigram}");
        assert!(unigram - rate > 2.0, "rate {rate} vs unigram {unigram}");
        assert_eq!(w.unigram_entropy(1, 0), 0.0);
    }

    #[test]
    fn mean_nll_agrees_with_mean_entropy() {
        for (vocab, seed) in [(256, 0), (64, 4), (4_096, 5)] {
            let n = 400_000;
            let g = world(vocab, seed).generate(seed + 100, n);
            let (entropy, nll) = (g.entropy_sum_nats / n as f64, g.nll_sum_nats / n as f64);
            assert!(
                (entropy - nll).abs() < 0.01,
                "vocab {vocab}: entropy {entropy} vs nll {nll}"
            );
        }
    }

    /// Cross-entropy (nats/token) on `test` of an add-`alpha` n-gram model fitted on `train`.
    fn ngram_cross_entropy(
        train: &[u32],
        test: &[u32],
        order: usize,
        vocab: usize,
        alpha: f64,
    ) -> f64 {
        use std::collections::HashMap;
        let mut counts: HashMap<&[u32], (HashMap<u32, f64>, f64)> = HashMap::new();
        for window in train.windows(order) {
            let (context, next) = window.split_at(order - 1);
            let entry = counts.entry(context).or_default();
            *entry.0.entry(next[0]).or_default() += 1.0;
            entry.1 += 1.0;
        }
        let mut total = 0.0;
        for window in test.windows(order) {
            let (context, next) = window.split_at(order - 1);
            let (count, sum) = counts.get(context).map_or((0.0, 0.0), |(c, s)| {
                (c.get(&next[0]).copied().unwrap_or(0.0), *s)
            });
            total -= ((count + alpha) / (sum + alpha * vocab as f64)).ln();
        }
        total / (test.len() - order + 1) as f64
    }

    #[test]
    fn fitted_ngram_models_do_not_beat_the_entropy_rate() {
        let w = world(256, 0);
        let train = w.generate(1, 1_000_000);
        let test = w.generate(2, 200_000);
        let rate = test.entropy_sum_nats / test.tokens.len() as f64;
        let unigram = ngram_cross_entropy(&train.tokens, &test.tokens, 1, 256, 0.5);
        let bigram = ngram_cross_entropy(&train.tokens, &test.tokens, 2, 256, 0.05);
        let trigram = ngram_cross_entropy(&train.tokens, &test.tokens, 3, 256, 0.01);
        assert!(
            unigram > bigram && bigram > rate + 0.5,
            "unigram {unigram}, bigram {bigram}, rate {rate}"
        );
        assert!(trigram > rate + 0.5, "trigram {trigram}, rate {rate}");
    }

    #[test]
    fn mixtures_and_regimes_follow_the_rules() {
        assert_eq!(
            [0, 15, 16, 31, 32, 2047, 2048, 2056].map(regime),
            [0, 0, 1, 1, 2, 2, 3, 3]
        );
        let forced = Mixture::new(1.0, 0.0, 2.0, SOURCES);
        assert!(
            (forced.entropy - 4f64.ln()).abs() < 1e-12
                && (forced.nll_marker - 4f64.ln()).abs() < 1e-12
        );
        let chain = Mixture::new(0.0, 0.0, 2.0, SOURCES);
        assert!((chain.entropy - 2.0).abs() < 1e-12 && chain.nll_chain.abs() < 1e-12);
        let s = &world(256, 0).sources[1];
        assert!((s.cdf[s.cdf.len() - 1] - 1.0).abs() < 1e-12);
        assert_eq!(s.rank(0.0), 0);
        assert_eq!(s.rank(1.0), s.cdf.len() - 1);
    }
}

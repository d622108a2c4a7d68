//! Small validated value types of the sweep file: names, enums, ranges and schedules. Each one
//! checks itself while parsing, so a bad value is reported with its line and key.

use std::fmt;
use std::str::FromStr;

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};

/// A sweep or model name: 1–64 characters of letters, digits, `-`, `_` and `.`, not starting
/// with `.` (it becomes a folder name).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Name(String);

impl Name {
    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Name {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let valid_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if s.is_empty() || s.len() > 64 {
            Err(format!("name `{s}` must have 1 to 64 characters"))
        } else if s.starts_with('.') || !s.chars().all(valid_char) {
            Err(format!(
                "name `{s}` may hold only letters, digits, `-`, `_` and `.`, and not start with `.`"
            ))
        } else {
            Ok(Name(s.to_string()))
        }
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(de::Error::custom)
    }
}

/// Declares a `snake_case` string enum with its list of accepted words.
macro_rules! word_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $word:literal),+ $(,)? } default $default:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $($(#[$vdoc])* $variant),+
        }

        impl $name {
            /// The word used in sweep files.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $word),+ }
            }
        }

        impl Default for $name {
            fn default() -> Self {
                $name::$default
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

word_enum!(
    /// The model family.
    Family {
        /// LLaMA style: RMSNorm, RoPE, SwiGLU, optional grouped-query attention.
        Llama = "llama",
    } default Llama
);

word_enum!(
    /// The compute backend.
    Backend {
        /// burn's pure-Rust CPU backend.
        Cpu = "cpu",
        /// burn-wgpu (Vulkan, Metal, DX12).
        Wgpu = "wgpu",
        /// burn-cuda.
        Cuda = "cuda",
    } default Cpu
);

word_enum!(
    /// The arithmetic of a training step's matrix products (parameters and optimiser state
    /// stay f32 whatever is chosen).
    Precision {
        /// Everything in f32.
        F32 = "f32",
        /// bfloat16 products, f32 accumulation, norms, softmax and loss.
        Bf16 = "bf16",
        /// float16 products with dynamic loss scaling, f32 elsewhere.
        F16 = "f16",
    } default F32
);

impl Precision {
    /// Whether this is the default, full f32 (kept out of run ids, so f32 runs keep theirs).
    pub fn is_f32(&self) -> bool {
        *self == Precision::F32
    }
}

word_enum!(
    /// The arithmetic of a teacher's forward passes (its logit pass and its online targets).
    TeacherPrecision {
        /// Weights and products in f32.
        F32 = "f32",
        /// Weights stored in bf16, activations rounded to bf16 at every matrix product, sums,
        /// norms, softmax and the residual stream in f32.
        Bf16 = "bf16",
    } default F32
);

impl TeacherPrecision {
    /// Whether this is the default, f32 (kept out of run ids and store headers).
    pub fn is_f32(&self) -> bool {
        *self == TeacherPrecision::F32
    }
}

word_enum!(
    /// Where the training text comes from.
    CorpusKind {
        /// The built-in seeded generator.
        Synthetic = "synthetic",
        /// `.txt` files.
        Text = "text",
        /// JSON lines with a text field.
        Jsonl = "jsonl",
        /// Parquet files with a text column.
        Parquet = "parquet",
    } default Synthetic
);

word_enum!(
    /// How a text corpus joins its documents into one token stream.
    Separator {
        /// `"\n\n"` after every document, tokenised as text (the rule of `byte` and `bpe`
        /// tokenizers, and of every run made before separators were a choice).
        BlankLine = "blank_line",
        /// Documents as released models saw them in training: each begins with the BOS token
        /// where the tokenizer's post-processor adds one (Gemma, Llama 3) and ends with the
        /// tokenizer's end-of-document token (`<|endoftext|>`, `<|end_of_text|>`, `<eos>`,
        /// `</s>`); the default with a `tokenizer.json` that has one.
        Eos = "eos",
    } default BlankLine
);

impl Separator {
    /// Whether this is the blank line (kept out of run ids, so older runs keep theirs).
    pub fn is_blank_line(&self) -> bool {
        *self == Separator::BlankLine
    }
}

word_enum!(
    /// How text becomes tokens.
    TokenizerKind {
        /// One token per byte (vocabulary 256).
        Byte = "byte",
        /// Byte-pair encoding trained on the corpus.
        Bpe = "bpe",
        /// A Hugging Face `tokenizer.json` named in the sweep file.
        File = "file",
    } default Byte
);

/// `[corpus] tokenizer`: `"byte"`, `"bpe"`, or the path of a Hugging Face `tokenizer.json`
/// (relative to the sweep file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenizerSetting {
    /// One token per byte.
    Byte,
    /// BPE trained on the corpus.
    Bpe,
    /// A `tokenizer.json` file.
    File(String),
}

impl TokenizerSetting {
    /// The kind of tokenizer.
    pub fn kind(&self) -> TokenizerKind {
        match self {
            TokenizerSetting::Byte => TokenizerKind::Byte,
            TokenizerSetting::Bpe => TokenizerKind::Bpe,
            TokenizerSetting::File(_) => TokenizerKind::File,
        }
    }

    /// The path of a tokenizer file, as written.
    pub fn file(&self) -> Option<&str> {
        match self {
            TokenizerSetting::File(p) => Some(p),
            _ => None,
        }
    }
}

impl FromStr for TokenizerSetting {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "byte" => Ok(TokenizerSetting::Byte),
            "bpe" => Ok(TokenizerSetting::Bpe),
            path if path.ends_with(".json") => Ok(TokenizerSetting::File(path.to_string())),
            other => Err(format!(
                "tokenizer `{other}` must be `byte`, `bpe`, or the path of a Hugging Face `tokenizer.json`"
            )),
        }
    }
}

impl Serialize for TokenizerSetting {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            TokenizerSetting::Byte => s.serialize_str("byte"),
            TokenizerSetting::Bpe => s.serialize_str("bpe"),
            TokenizerSetting::File(p) => s.serialize_str(p),
        }
    }
}

impl<'de> Deserialize<'de> for TokenizerSetting {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(de::Error::custom)
    }
}

word_enum!(
    /// Where a student's teacher logits come from.
    DistillMode {
        /// Read from a stored logit pass.
        Offline = "offline",
        /// Computed by the teacher inside each student step.
        Online = "online",
    } default Offline
);

word_enum!(
    /// How the `[distill]` axes combine into distillation settings.
    Design {
        /// Every combination of every axis (the full factorial grid).
        Grid = "grid",
        /// The first value of every axis is the reference setting; each other value is tried
        /// with every other axis at its reference (an ablation, as Peng et al. ran theirs).
        OneAtATime = "one_at_a_time",
    } default Grid
);

word_enum!(
    /// The distillation loss ℓ.
    LossKind {
        /// Forward KL(teacher ‖ student).
        Kl = "kl",
        /// Reverse KL(student ‖ teacher).
        ReverseKl = "reverse_kl",
        /// Cross-entropy of the student against the teacher's processed probabilities.
        CeSoft = "ce_soft",
        /// Mean squared error between distributions.
        Mse = "mse",
    } default Kl
);

word_enum!(
    /// Which teacher tokens a student's targets keep at each position.
    Targets {
        /// The k most probable (after the top-p nucleus): biased towards the head of the
        /// distribution (Anshumann et al., 2025).
        TopK = "top_k",
        /// k tokens drawn from the teacher's distribution, their counts as weights: an
        /// unbiased estimate of it ("Sparse Logit Sampling", Anshumann et al., ACL 2025).
        Sampled = "sampled",
    } default TopK
);

impl Targets {
    /// Whether this is the default (kept out of run ids, so earlier runs keep theirs).
    pub fn is_top_k(&self) -> bool {
        *self == Targets::TopK
    }
}

word_enum!(
    /// What becomes of the teacher's probability outside the kept tokens.
    Missing {
        /// The kept tokens are renormalised to sum to one; the tail is dropped.
        Renormalise = "renormalise",
        /// The tail's mass is one extra outcome, matched against the student's own mass
        /// outside the kept tokens (DistillKit's missing-probability handling).
        Bucket = "bucket",
    } default Renormalise
);

impl Missing {
    /// Whether this is the default (kept out of run ids, so earlier runs keep theirs).
    pub fn is_renormalise(&self) -> bool {
        *self == Missing::Renormalise
    }
}

word_enum!(
    /// The loss of a student whose teacher has another tokenizer, at positions aligned by
    /// bytes (`crate::distill::align`).
    CrossTokenizer {
        /// Universal Logit Distillation (Boizard et al., 2024): the Wasserstein-1 distance
        /// between the sorted probability vectors of teacher and student (top-k of each).
        Uld = "uld",
        /// GOLD's hybrid (TRL): exact KL over the tokens whose bytes are the same in both
        /// vocabularies, ULD over the rest.
        Gold = "gold",
    } default Uld
);

fn finite_in(value: f64, low: f64, high: f64, low_open: bool, what: &str) -> Result<f64, String> {
    let above = if low_open { value > low } else { value >= low };
    if value.is_finite() && above && value <= high {
        Ok(value)
    } else {
        let bracket = if low_open { "(" } else { "[" };
        Err(format!(
            "{what} `{value}` must lie in {bracket}{low}, {high}]"
        ))
    }
}

/// Declares an `f64` newtype checked against a range while parsing.
macro_rules! checked_float {
    ($(#[$doc:meta])* $name:ident, $low:expr, $high:expr, $open:expr, $what:literal) => {
        $(#[$doc])*
        ///
        /// Its value is read with [`Self::get`]; outside this crate one is made only through
        /// its check (`try_from`, or parsing), so an unchecked value cannot enter a plan.
        #[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize)]
        pub struct $name(pub(crate) f64);

        impl $name {
            /// The checked value.
            pub fn get(self) -> f64 {
                self.0
            }
        }

        impl TryFrom<f64> for $name {
            type Error = String;
            fn try_from(v: f64) -> Result<Self, String> {
                finite_in(v, $low, $high, $open, $what).map($name)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let v = f64::deserialize(d)?;
                $name::try_from(v).map_err(de::Error::custom)
            }
        }
    };
}

checked_float!(
    /// A number in [0, 1].
    Fraction, 0.0, 1.0, false, "value"
);
checked_float!(
    /// A positive finite number.
    Ratio, 0.0, 1e30, true, "value"
);
checked_float!(
    /// Softmax temperature τ in (0, 100].
    Temperature, 0.0, 100.0, true, "temperature"
);
checked_float!(
    /// Nucleus mass in (0, 1].
    TopP, 0.0, 1.0, true, "top_p"
);

/// How many teacher tokens to keep per position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TopK {
    /// At most this many.
    Keep(u64),
    /// The whole vocabulary (written `"all"`).
    All,
}

impl Serialize for TopK {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            TopK::Keep(k) => s.serialize_u64(*k),
            TopK::All => s.serialize_str("all"),
        }
    }
}

impl TopK {
    /// The number of kept tokens for a vocabulary of `vocab`.
    pub fn kept(self, vocab: u64) -> u64 {
        match self {
            TopK::Keep(k) => k.min(vocab),
            TopK::All => vocab,
        }
    }
}

impl fmt::Display for TopK {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            TopK::Keep(k) => write!(f, "{k}"),
            TopK::All => f.write_str("all"),
        }
    }
}

impl<'de> Deserialize<'de> for TopK {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = TopK;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a whole number of at least 1, or \"all\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<TopK, E> {
                if v >= 1 {
                    Ok(TopK::Keep(v as u64))
                } else {
                    Err(E::custom(format!(
                        "top_k `{v}` must be at least 1 (or \"all\")"
                    )))
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<TopK, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(i64::MAX))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<TopK, E> {
                if v == "all" {
                    Ok(TopK::All)
                } else {
                    Err(E::custom(format!(
                        "top_k `{v}` must be a number or \"all\""
                    )))
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// The shape of a schedule over a run's steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleKind {
    /// The peak value throughout (after any warm-up).
    Constant,
    /// Rises linearly from `final` to the peak over the whole run.
    LinearUp,
    /// Falls linearly from the peak to `final` over the run (after any warm-up).
    LinearDown,
    /// Cosine from the peak down to `final` (after any warm-up).
    Cosine,
    /// Warm-up, stable at the peak, then linear decay over the last `decay` fraction.
    Wsd,
}

/// A value that changes over a run: the learning rate or the distillation weight α.
///
/// Written as a number (constant) or a table `{ schedule = "wsd", peak = 3e-3, warmup = 0.1, decay
/// = 0.2, final = 0.0 }` (`max` is accepted for `peak`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleTable {
    /// The shape.
    pub schedule: ScheduleKind,
    /// The highest value.
    #[serde(alias = "max")]
    pub peak: f64,
    /// Fraction of the run spent warming up linearly from 0.
    #[serde(default)]
    pub warmup: f64,
    /// Fraction of the run spent decaying (WSD only).
    #[serde(default = "default_decay")]
    pub decay: f64,
    /// The value at the end (or start, for `linear_up`) as a fraction of the peak.
    #[serde(default, rename = "final")]
    pub final_ratio: f64,
}

fn default_decay() -> f64 {
    0.2
}

/// A schedule value outside its bounds; the message names the key and the bound.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ScheduleError(String);

/// A validated schedule.
///
/// Its table is crate-private, so outside the crate one is made only through a check
/// ([`Schedule::with_peak`], or reading a sweep file).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Schedule(pub(crate) ScheduleTable);

impl Schedule {
    /// Checks `table`: a finite peak ≥ 0, fractions in [0, 1], warm-up and decay within the run.
    pub(crate) fn new(table: ScheduleTable) -> Result<Self, ScheduleError> {
        Schedule::check(table).map_err(ScheduleError)
    }

    /// The same schedule with its peak set to `peak`, checked.
    pub fn with_peak(self, peak: f64) -> Result<Self, ScheduleError> {
        Schedule::new(ScheduleTable { peak, ..self.0 })
    }

    /// A constant value (unchecked: callers in the crate pass values already checked).
    pub(crate) fn constant(value: f64) -> Self {
        Schedule(ScheduleTable {
            schedule: ScheduleKind::Constant,
            peak: value,
            warmup: 0.0,
            decay: 0.0,
            final_ratio: 0.0,
        })
    }

    /// Warm-up, stable, decay (unchecked, as [`Schedule::constant`]).
    pub(crate) fn wsd(peak: f64, warmup: f64, decay: f64) -> Self {
        Schedule(ScheduleTable {
            schedule: ScheduleKind::Wsd,
            peak,
            warmup,
            decay,
            final_ratio: 0.0,
        })
    }

    /// The peak value.
    pub fn peak(&self) -> f64 {
        self.0.peak
    }

    fn check(mut table: ScheduleTable) -> Result<Self, String> {
        if table.schedule != ScheduleKind::Wsd {
            table.decay = 0.0; // only WSD reads it; normalised so equal schedules hash equally
        }
        let t = &table;
        if !t.peak.is_finite() || t.peak < 0.0 {
            return Err(format!("peak `{}` must be a finite number ≥ 0", t.peak));
        }
        for (key, v) in [
            ("warmup", t.warmup),
            ("decay", t.decay),
            ("final", t.final_ratio),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("`{key}` = `{v}` must lie in [0, 1]"));
            }
        }
        if t.schedule == ScheduleKind::Wsd && t.warmup + t.decay > 1.0 {
            return Err(format!(
                "warmup `{}` + decay `{}` exceed the whole run (1.0)",
                t.warmup, t.decay
            ));
        }
        Ok(Schedule(table))
    }

    /// A compact description such as `wsd0.003w0.1d0.2`, used in run names: the kind, the
    /// peak, and every fraction that is not zero.
    pub fn label(&self) -> String {
        let t = &self.0;
        let kind = match t.schedule {
            ScheduleKind::Constant => "",
            ScheduleKind::Wsd => "wsd",
            ScheduleKind::Cosine => "cos",
            ScheduleKind::LinearUp => "up",
            ScheduleKind::LinearDown => "down",
        };
        let mut label = format!("{kind}{}", t.peak);
        for (tag, v) in [("w", t.warmup), ("d", t.decay), ("f", t.final_ratio)] {
            let shown = v != 0.0 && (tag != "d" || t.schedule == ScheduleKind::Wsd);
            if shown {
                label += &format!("{tag}{v}");
            }
        }
        label
    }
}

impl<'de> Deserialize<'de> for Schedule {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Schedule;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number or a table such as { schedule = \"wsd\", peak = 3e-3 }")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Schedule, E> {
                Schedule::check(Schedule::constant(v).0).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Schedule, E> {
                self.visit_f64(v as f64)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Schedule, E> {
                self.visit_f64(v as f64)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Schedule, A::Error> {
                let table = ScheduleTable::deserialize(MapAccessDeserializer::new(map))?;
                Schedule::check(table).map_err(de::Error::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// The distillation weight α: a schedule whose peak lies in [0, 1].
///
/// Its schedule is crate-private, so outside the crate one is made only through
/// [`Alpha::new`] or reading a sweep file.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Alpha(pub(crate) Schedule);

impl Alpha {
    /// Checks that `schedule` peaks at most at 1.
    pub fn new(schedule: Schedule) -> Result<Self, ScheduleError> {
        if schedule.peak() > 1.0 {
            return Err(ScheduleError(format!(
                "alpha `{}` must lie in [0, 1]",
                schedule.peak()
            )));
        }
        Ok(Alpha(schedule))
    }

    /// A constant α, checked.
    pub fn constant(value: f64) -> Result<Self, ScheduleError> {
        Alpha::new(Schedule::new(Schedule::constant(value).0)?)
    }

    /// The schedule.
    pub fn schedule(&self) -> &Schedule {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Alpha {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Alpha::new(Schedule::deserialize(d)?).map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Doc {
        a: Alpha,
    }

    #[test]
    fn names_are_folder_safe() {
        assert!("capacity-gap_1.0".parse::<Name>().is_ok());
        for bad in ["", ".hidden", "a/b", "a b", &"x".repeat(65)] {
            assert!(bad.parse::<Name>().is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn alpha_as_number_or_schedule() {
        let d: Doc = toml::from_str("a = 0.9").unwrap();
        assert_eq!(d.a.0, Schedule::constant(0.9));
        let d: Doc = toml::from_str("a = { schedule = \"wsd\", max = 0.9 }").unwrap();
        assert_eq!(d.a.0.0.schedule, ScheduleKind::Wsd);
        assert_eq!(d.a.0.peak(), 0.9);
        assert!(toml::from_str::<Doc>("a = 1.5").is_err());
        assert!(toml::from_str::<Doc>("a = { schedule = \"wsd\", max = 0.9, bogus = 1 }").is_err());
        assert!(
            toml::from_str::<Doc>("a = { schedule = \"wsd\", max = 0.5, warmup = 0.9 }").is_err()
        );
    }
}

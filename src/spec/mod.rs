//! The sweep file: its schema, parsing with located errors, size strings and validation. It
//! depends on nothing else in the crate; the files a sweep names are read by `plan`.

mod axis;
mod error;
mod load;
mod schema;
pub mod slurm;
mod sweep;
pub mod units;
mod validate;
mod values;

pub use axis::{Axis, OneOrMany};
pub use error::{Invalid, Location, SpecError};
pub use schema::{
    ConstraintsSection, CorpusSection, DistillSection, EstimateSection, GroupSection,
    LimitsSection, ModelEntry, ModelSection, SweepFile, TrainSection,
};
pub use sweep::Sweep;
pub use units::{ByteSize, Count, TokenBudget};
pub use validate::{BYTE_VOCAB, DEFAULT_SYNTHETIC_VOCAB};
pub use values::{
    Alpha, Backend, CorpusKind, CrossTokenizer, Design, DistillMode, Family, Fraction, LossKind,
    Missing, Name, Ratio, Schedule, ScheduleKind, ScheduleTable, Separator, Targets, Temperature,
    TokenizerKind, TokenizerSetting, TopK, TopP,
};
pub use values::{Precision, TeacherPrecision};

//! The sweep file: its schema, parsing with located errors, size strings and validation, and
//! the metadata of the files it names (tokenizer, pre-trained teachers).

mod axis;
mod error;
mod files;
mod load;
mod schema;
pub mod slurm;
pub mod units;
mod validate;
mod values;

pub use axis::{Axis, OneOrMany};
pub use error::{Invalid, Location, SpecError};
pub use files::{PretrainedEntry, SweepFiles, resolve};
pub use load::{Sweep, hex};
pub use schema::{
    ConstraintsSection, CorpusSection, DistillSection, EstimateSection, GroupSection,
    LimitsSection, ModelEntry, ModelSection, SweepFile, TrainSection,
};
pub use units::{ByteSize, Count, TokenBudget};
pub use validate::{BYTE_VOCAB, DEFAULT_SYNTHETIC_VOCAB};
pub use values::{
    Alpha, Backend, CorpusKind, Design, DistillMode, Family, Fraction, LossKind, Name, Ratio,
    Schedule, ScheduleKind, ScheduleTable, Temperature, TokenizerKind, TokenizerSetting, TopK,
    TopP,
};

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

pub use error::{Invalid, SpecError};
pub(crate) use schema::{CorpusSection, DistillSection, GroupSection, ModelEntry};
pub use sweep::Sweep;
pub(crate) use units::{Count, TokenBudget};
pub(crate) use validate::{BYTE_VOCAB, DEFAULT_SYNTHETIC_VOCAB};
#[cfg(test)]
pub(crate) use values::ScheduleTable;
pub use values::{
    Alpha, Backend, CorpusKind, CrossTokenizer, LossKind, Missing, Schedule, ScheduleError,
    Separator, Temperature, TokenizerKind, TopK,
};
pub(crate) use values::{Design, DistillMode, Name, ScheduleKind, Targets, TokenizerSetting, TopP};
pub use values::{Precision, TeacherPrecision};

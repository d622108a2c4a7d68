//! Distillation: truncating teacher distributions, the sparse distillation losses, the offline
//! logit store, and the student objective that mixes them with the data loss.

pub mod device_truncate;
pub mod logits_run;
mod loss;
mod objective;
pub mod reader;
pub mod store;
mod truncate;

pub use loss::{SparseTargets, distill_loss, distill_loss_rows};
pub use objective::{
    DistillObjective, TeacherSource, TruncateOn, agreement, sparse_targets, teacher_support,
};
pub use reader::StoreReader;
pub use truncate::{Kept, refine, truncate};

//! Distillation's targets: truncating teacher distributions, the sparse distillation losses on
//! them, the offline logit store (written by a logit pass, read window by window), and a student's
//! teacher targets, online or offline. The objective that trains on them is `train`'s.

pub mod align;
pub mod aligned;
pub mod device_truncate;
pub mod logits_run;
mod loss;
pub mod reader;
pub mod store;
mod targets;
mod truncate;

pub use loss::{SparseTargets, distill_loss, distill_loss_rows};
pub use reader::StoreReader;
pub use targets::{
    CrossSide, TeacherSource, TeacherTargets, TruncateOn, sparse_targets, teacher_next_support_k,
    teacher_samples, teacher_support,
};
pub use truncate::{Kept, TokenAfter, Truncation, draw_seed, refine, sample, truncate};

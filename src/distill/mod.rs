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

pub use loss::distill_loss;
pub(crate) use loss::distill_loss_rows;
pub(crate) use reader::StoreReader;
pub(crate) use targets::{CrossSide, TeacherTargets};
pub use targets::{TeacherSource, TruncateOn, sparse_targets, teacher_support};
pub(crate) use truncate::Truncation;
pub use truncate::{Kept, refine, sample, truncate};

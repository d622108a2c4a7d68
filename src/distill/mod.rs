//! Distillation: truncating teacher distributions, the sparse distillation losses, and the
//! objective that mixes them with the data loss.

mod loss;
pub mod store;
mod truncate;

pub use loss::{SparseTargets, distill_loss};
pub use truncate::{Kept, refine, truncate};

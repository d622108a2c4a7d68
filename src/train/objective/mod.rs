//! What a training step minimises: the plain next-token loss (teachers, baselines) or a
//! student's mix of it with a distillation loss, behind one trait, so the training loop (solo or
//! stacked) never knows which.

mod distill;
mod next_token;
mod terms;

pub use distill::DistillObjective;
pub use next_token::{NextToken, cross_entropy, head_input, summed_cross_entropy};
pub use terms::Objective;
pub(crate) use terms::{DistillTerm, HeadInput, LossTerms};

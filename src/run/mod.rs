//! Executing a planned sweep: picking runnable runs, training them, and recording everything in
//! the sweep database. The runner never prints; it reports [`RunEvent`]s to a callback.

mod events;
mod pools;
mod runner;

pub use events::RunEvent;
pub use pools::threads_per_worker;
pub use runner::{RunError, RunOptions, Summary, execute};

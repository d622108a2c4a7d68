//! The integration tests: one binary (as ripgrep's `tests/integration/`), a module per topic,
//! so the suite links burn, wgpu and polars once instead of once per file. Run one topic with
//! `cargo test --release --features gpu --test it TOPIC::` (for example `plan_cli::`).

mod align;
mod answers;
mod common;
mod crash_safety;
mod cross_tokenizer;
mod cuda_backend;
mod data_corpora;
mod device_truncate;
mod distill_run;
mod families;
mod findings;
mod first_contact;
mod fit_laws;
mod gc;
mod hf_fixture;
mod hf_interop;
mod house;
mod ids;
mod kernels;
mod layers;
mod lr_tuning;
mod plan_cli;
mod plan_db;
mod pretrained_sweep;
mod released;
mod report;
mod run_cli;
mod run_stack;
mod sample_degree;
mod shared_store;
mod slurm;
mod snapshots;
mod spec_fuzz;
mod stack_train;
mod suggest;
mod train_engine;
mod wgpu_backend;

//! The `pdsweep` binary: parse the command line, dispatch, print one error, pick the exit code.

mod cli;
mod commands;
#[cfg(test)]
mod doc_examples;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};

fn main() -> ExitCode {
    restore_default_sigpipe();
    pin_burn_default_device();
    pdsweep::alloc::tune_for_training();
    let cli = Cli::parse();
    let result = dispatch(cli.command);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", pdsweep::error::render(err.chain()));
            ExitCode::from(exit_code(&err))
        }
    }
}

/// Runs one subcommand.
fn dispatch(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Plan(args) => commands::plan(args.into_command()),
        Command::Run(args) => commands::run(args.into_command()),
        Command::Status(args) => commands::status(args.into_command()),
        Command::Gc(args) => commands::gc(args.into_command()),
        Command::Size(args) => commands::size(args.into_command()),
        Command::Report(args) => commands::report(args.into_command()),
        Command::Export(args) => commands::export(args.into_command()),
        Command::Sample(args) => commands::sample(args.into_command()),
        Command::Fit(args) => commands::fit(args.into_command()),
        Command::Recommend(args) => commands::recommend(args.into_command()),
        Command::Triage(args) => commands::triage(args.into_command()),
        Command::Bench(args) => commands::bench(args.into_command()),
        Command::Devices(args) => commands::devices(args.into_command()),
        Command::Suggest(args) => commands::suggest(args.into_command()),
        Command::Slurm(args) => commands::slurm(args.into_command()),
        Command::Worker(args) => commands::worker(args.into_command()),
    }
}

/// Lets `pdsweep status | head` end quietly instead of panicking on a closed pipe.
fn restore_default_sigpipe() {
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to the default before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// pdsweep names the device of every tensor it makes; only burn-optim's checkpoint loading puts the
/// optimiser state on burn's default device (moving it to the parameters' device at the next step),
/// and that default is a GPU backend whenever one is compiled in (wgpu is, by default): a CPU run
/// resumed from its checkpoint would open the GPU, or fail on a machine without one.
///
/// `BURN_DEVICE=flex` makes it the CPU, unless the user set it.
fn pin_burn_default_device() {
    if std::env::var_os("BURN_DEVICE").is_none() {
        // SAFETY: before any thread starts, nothing reads the environment concurrently.
        unsafe { std::env::set_var("BURN_DEVICE", "flex") };
    }
}

/// 2 for input the user must fix (sweep file, arguments, data to fit), 3 when a sweep ran but some runs
/// failed, 4 when another process holds the sweep (its lease), 130 when it was stopped on
/// request, 1 for everything else.
fn exit_code(err: &anyhow::Error) -> u8 {
    if err.downcast_ref::<commands::RunsFailed>().is_some() {
        3
    } else if err
        .downcast_ref::<pdsweep::run::lease::LeaseError>()
        .is_some_and(|e| matches!(e, pdsweep::run::lease::LeaseError::Held { .. }))
    {
        4
    } else if err.downcast_ref::<commands::Interrupted>().is_some()
        || err.downcast_ref::<commands::WorkerStopped>().is_some()
    {
        130
    } else if err.downcast_ref::<pdsweep::spec::SpecError>().is_some()
        || err.downcast_ref::<commands::UsageError>().is_some()
        || err
            .downcast_ref::<pdsweep::suggest::SuggestError>()
            .is_some()
        || err.downcast_ref::<pdsweep::suggest::CheckError>().is_some()
        || matches!(
            err.downcast_ref::<pdsweep::report::ReportError>(),
            Some(pdsweep::report::ReportError::NoPlan { .. })
        )
        || err
            .downcast_ref::<pdsweep::fit::FitError>()
            .is_some_and(|e| e.is_user_input())
    {
        2
    } else {
        1
    }
}

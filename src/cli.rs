//! The command line: clap types only, converted once into the commands' own option types.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::commands::{
    ExportCommand, PlanCommand, ReportCommand, RunCommand, SizeCommand, StatusCommand,
};
use pdsweep::plan::PlanFormat;
use pdsweep::report::export::ExportFormat;

/// Plan, run and analyse pre-training distillation sweeps: which teacher is best for a student?
#[derive(Debug, Parser)]
#[command(name = "pdsweep", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Expand a sweep file into its run graph, with exact sizes, FLOPs, disk and time, and
    /// record it in results/NAME/sweep.db.
    Plan(PlanArgs),
    /// Plan the sweep, then train every run whose dependencies are done, recording metrics
    /// and results in results/NAME/sweep.db (finished runs are skipped).
    Run(RunArgs),
    /// Show where a sweep stands: runs per kind and state, progress, ETA from measured
    /// throughput, and the errors of failed runs.
    Status(StatusArgs),
    /// Print the exact parameter counts of a model: an explicit shape, or the shape pdsweep
    /// derives from a target size.
    Size(SizeArgs),
    /// Draw every figure of a sweep (PNG at 300 dpi and SVG) and a self-contained
    /// index.html into reports/NAME/, and say what is missing.
    Report(ReportArgs),
    /// Write a sweep's runs, metrics and fits as CSV, Parquet or JSON tables (default
    /// folder results/NAME/export/).
    Export(ExportArgs),
}

/// Output formats of `plan`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FormatArg {
    /// A readable table and summary.
    Table,
    /// One JSON object with `runs` and `totals`.
    Json,
    /// One CSV row per run.
    Csv,
}

/// `pdsweep plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The sweep file, e.g. sweeps/quickstart.toml.
    pub sweep: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: FormatArg,
    /// Folder holding one sub-folder per sweep with its sweep.db.
    #[arg(long, default_value = "results", value_name = "DIR")]
    pub results: PathBuf,
    /// Print the plan without recording it in the sweep database.
    #[arg(long)]
    pub dry_run: bool,
    /// Training throughput in FLOP/s used for the time estimate.
    #[arg(long, value_name = "FLOPS")]
    pub flops_per_s: Option<f64>,
}

/// `pdsweep run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The sweep file, e.g. sweeps/quickstart.toml.
    pub sweep: PathBuf,
    /// Folder holding one sub-folder per sweep with its sweep.db.
    #[arg(long, default_value = "results", value_name = "DIR")]
    pub results: PathBuf,
    /// Try runs that failed before again.
    #[arg(long)]
    pub retry_failed: bool,
    /// Runs executed at once (independent runs only; a student waits for its teacher).
    #[arg(long, short = 'j', default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: u16,
    /// GPU indices to spread the runs over, e.g. `0,1` (cuda/wgpu backends); with `--jobs N`
    /// larger than the number of devices, several runs share a device.
    #[arg(long, value_delimiter = ',', value_name = "I,J,...")]
    pub devices: Vec<usize>,
}

impl RunArgs {
    /// The command's own options.
    pub fn into_command(self) -> RunCommand {
        RunCommand {
            sweep: self.sweep,
            results: self.results,
            retry_failed: self.retry_failed,
            jobs: usize::from(self.jobs).max(self.devices.len()),
            devices: self.devices,
        }
    }
}

/// `pdsweep status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The sweep file.
    pub sweep: PathBuf,
    /// Folder holding one sub-folder per sweep with its sweep.db.
    #[arg(long, default_value = "results", value_name = "DIR")]
    pub results: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: StatusFormat,
}

/// Output formats of `status`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum StatusFormat {
    /// A readable summary.
    Table,
    /// `{"runs": [...], "counts": {...}, "eta_s": ...}`.
    Json,
}

impl StatusArgs {
    /// The command's own options.
    pub fn into_command(self) -> StatusCommand {
        StatusCommand {
            sweep: self.sweep,
            results: self.results,
            json: matches!(self.format, StatusFormat::Json),
        }
    }
}

/// `pdsweep size`.
#[derive(Debug, Args)]
pub struct SizeArgs {
    /// Target non-embedding size such as 1.9B; derives a shape. Omit it and give --d-model,
    /// --n-layers, --n-heads and --d-ff for an explicit shape.
    #[arg(value_name = "SIZE", required_unless_present = "d_model")]
    pub target: Option<String>,
    /// Explicit shape: model width.
    #[arg(long, requires_all = ["n_layers", "n_heads", "d_ff"], conflicts_with = "target")]
    pub d_model: Option<u64>,
    /// Explicit shape: number of blocks.
    #[arg(long)]
    pub n_layers: Option<u64>,
    /// Explicit shape: query heads.
    #[arg(long)]
    pub n_heads: Option<u64>,
    /// Explicit shape: key/value heads (default: --n-heads).
    #[arg(long)]
    pub n_kv_heads: Option<u64>,
    /// Explicit shape: SwiGLU hidden width.
    #[arg(long)]
    pub d_ff: Option<u64>,
    /// Vocabulary size.
    #[arg(long, default_value_t = 256)]
    pub vocab: u64,
    /// Give the output head its own weights (LLaMA does; tiny models usually tie).
    #[arg(long)]
    pub untied: bool,
    /// Derived shapes: target d_model / n_layers.
    #[arg(long, default_value_t = 32.0)]
    pub aspect_ratio: f64,
    /// Derived shapes: fixed head width.
    #[arg(long)]
    pub head_dim: Option<u64>,
    /// Derived shapes: query heads per key/value head.
    #[arg(long, default_value_t = 1)]
    pub kv_groups: u64,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

impl PlanArgs {
    /// The command's own options.
    pub fn into_command(self) -> PlanCommand {
        PlanCommand {
            sweep: self.sweep,
            format: match self.format {
                FormatArg::Table => PlanFormat::Table,
                FormatArg::Json => PlanFormat::Json,
                FormatArg::Csv => PlanFormat::Csv,
            },
            results: self.results,
            dry_run: self.dry_run,
            flops_per_s: self.flops_per_s,
        }
    }
}

impl SizeArgs {
    /// The command's own options.
    pub fn into_command(self) -> SizeCommand {
        SizeCommand {
            target: self.target,
            d_model: self.d_model,
            n_layers: self.n_layers,
            n_heads: self.n_heads,
            n_kv_heads: self.n_kv_heads,
            d_ff: self.d_ff,
            vocab: self.vocab,
            tie_embeddings: !self.untied,
            aspect_ratio: self.aspect_ratio,
            head_dim: self.head_dim,
            kv_groups: self.kv_groups,
            json: self.json,
        }
    }
}

/// `pdsweep report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The sweep file (or a sweep's name); without it, the only sweep under --results.
    pub sweep: Option<PathBuf>,
    /// Folder holding one sub-folder per sweep with its sweep.db.
    #[arg(long, default_value = "results", value_name = "DIR")]
    pub results: PathBuf,
    /// Where to write the report (default: reports/NAME).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

impl ReportArgs {
    /// The command's own options.
    pub fn into_command(self) -> ReportCommand {
        ReportCommand {
            sweep: self.sweep,
            results: self.results,
            out: self.out,
        }
    }
}

/// Output formats of `export`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ExportFormatArg {
    /// runs.csv, metrics.csv, fits.csv.
    Csv,
    /// runs.parquet, metrics.parquet, fits.parquet.
    Parquet,
    /// export.json: {"runs": [...], "fits": [...], "metrics": [...]}.
    Json,
}

/// `pdsweep export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The sweep file (or a sweep's name); without it, the only sweep under --results.
    pub sweep: Option<PathBuf>,
    /// Folder holding one sub-folder per sweep with its sweep.db.
    #[arg(long, default_value = "results", value_name = "DIR")]
    pub results: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "csv")]
    pub format: ExportFormatArg,
    /// Where to write the tables (default: results/NAME/export).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

impl ExportArgs {
    /// The command's own options.
    pub fn into_command(self) -> ExportCommand {
        ExportCommand {
            sweep: self.sweep,
            results: self.results,
            format: match self.format {
                ExportFormatArg::Csv => ExportFormat::Csv,
                ExportFormatArg::Parquet => ExportFormat::Parquet,
                ExportFormatArg::Json => ExportFormat::Json,
            },
            out: self.out,
        }
    }
}

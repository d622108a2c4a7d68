//! The command line: clap types only, converted once into the commands' own option types.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::commands::{BenchCommand, DevicesCommand};
use crate::commands::{
    ExportCommand, FitCommand, FitTarget, GcCommand, PlanCommand, RecommendCommand, ReportCommand,
    RunCommand, SizeCommand, SlurmCommand, StatusCommand, SuggestCommand, TriageCommand,
    WorkerCommand,
};
use crate::commands::{PromptSource, SampleCommand};
use pdsweep::fit::LawKind;
use pdsweep::generate::Sampling;
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
    /// Remove the logit stores of runs no longer in the sweep's current plan (left behind when
    /// the sweep file changed its teachers, budgets or truncation); results are kept.
    Gc(GcArgs),
    /// Print the exact parameter counts of a model: an explicit shape, or the shape pdsweep
    /// derives from a target size.
    Size(SizeArgs),
    /// Draw every figure of a sweep (PNG at 300 dpi and SVG) and a self-contained
    /// index.html into reports/NAME/, and say what is missing.
    Report(ReportArgs),
    /// Write a sweep's runs, metrics, fits, similarity and distillation degrees as CSV,
    /// Parquet or JSON tables (default folder results/NAME/export/).
    Export(ExportArgs),
    /// Text from a finished run (teacher, student, baseline, or pre-trained teacher of a plain
    /// LLaMA architecture): continue a prompt or held-out prefixes, greedy or sampled, with a
    /// key/value cache.
    Sample(SampleArgs),
    /// Fit scaling laws with bootstrap intervals: to a sweep (supervised law on teachers and
    /// baselines, distillation law on students, capacity-gap optima; stored in its database)
    /// or to any CSV file (`--data`).
    Fit(FitArgs),
    /// The optimal teacher for a student size and budget, from a sweep's fits or from
    /// Busbridge et al.'s published law (`--law busbridge2025`).
    Recommend(RecommendArgs),
    /// Rank the sweep's finished teachers (trained or released, any tokenizer) for a student by
    /// the distance of their held-out bits per byte from the fitted optimal teacher loss, before
    /// distilling; checked against the gains where the sweep distilled from them.
    Triage(TriageArgs),
    /// Measure training (or logit-pass) throughput and MFU of one model shape on one device,
    /// through the same code a run uses (default: a GPT-2-small-like 124M model, context 1024).
    Bench(BenchArgs),
    /// List the GPUs `--devices` can select, per backend in index order: wgpu adapters and
    /// CUDA devices (or what the cuda backend lacks on this machine).
    Devices(DevicesArgs),
    /// Propose the next runs that most shrink the optimal teacher's interval per hour of
    /// compute (a longer student budget where runs have not converged, teachers beyond the
    /// grid's edge or around T*, more seeds), from the sweep's finished runs; `--write FILE`
    /// saves them as a follow-up sweep file for `run`.
    Suggest(SuggestArgs),
    /// Run the sweep on a Slurm cluster: submit the runs that are not done as job arrays with
    /// dependencies, follow them, record their results, resubmit failed attempts (Ctrl-C
    /// leaves the jobs running; the same command re-attaches).
    Slurm(SlurmArgs),
    /// Execute one unit of work of a Slurm job array (what `pdsweep slurm`'s jobs run).
    Worker(WorkerArgs),
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
    /// Print the plan without recording it in the sweep database or preparing the corpus: a
    /// text corpus is priced from its files' sizes and a sample of them (tokens, cache size,
    /// preparation time), in seconds whatever its size.
    #[arg(long)]
    pub dry_run: bool,
    /// Training throughput in FLOP/s used for the time estimate.
    #[arg(long, value_name = "FLOPS")]
    pub flops_per_s: Option<f64>,
    /// Refuse the plan (exit code 2) if it has any design warning.
    #[arg(long)]
    pub strict: bool,
    /// Before any run was measured, estimate time from stated defaults instead of timing a
    /// short probe on this machine (the probe runs once per machine and is cached).
    #[arg(long)]
    pub no_probe: bool,
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
    /// GPU indices to spread the runs over, e.g. `0,1`, or `all` for every GPU `pdsweep
    /// devices` lists for the sweep's backend (cuda/wgpu); with `--jobs N` larger than the
    /// number of devices, several runs share a device.
    #[arg(long, value_name = "I,J,...|all")]
    pub devices: Option<pdsweep::run::DeviceChoice>,
    /// CPU threads each job trains with, in its own thread pool (default: the cores shared
    /// out among the jobs). Results do not depend on it.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub threads: Option<u16>,
    /// Train runnable runs of one shape (model, context, batch rows) as one batched model of up
    /// to N members: `auto` (as many as measured faster on this backend; on the CPU only
    /// stacks of 16 or more, since stacks of 4 measured slower and of 8 at most 5 % faster),
    /// `off`, or N.
    #[arg(long, default_value = "auto", value_name = "auto|N|off")]
    pub stack: pdsweep::run::StackPolicy,
}

impl RunArgs {
    /// The command's own options.
    pub fn into_command(self) -> RunCommand {
        RunCommand {
            sweep: self.sweep,
            results: self.results,
            retry_failed: self.retry_failed,
            jobs: usize::from(self.jobs),
            devices: self.devices.unwrap_or_default(),
            threads: self.threads.map_or(0, usize::from),
            stack: self.stack,
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
    /// Refresh every SECONDS (default 5) until no run is planned or running, or Ctrl-C; on a
    /// terminal the screen is redrawn, otherwise each refresh is printed after the last (one
    /// JSON object per line with `--format json`).
    #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "5")]
    pub watch: Option<f64>,
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
            watch: self.watch,
        }
    }
}

/// `pdsweep gc`.
#[derive(Debug, Args)]
pub struct GcArgs {
    /// The sweep file.
    pub sweep: PathBuf,
    /// Folder holding one sub-folder per sweep with its sweep.db.
    #[arg(long, default_value = "results", value_name = "DIR")]
    pub results: PathBuf,
    /// List what would be removed and remove nothing.
    #[arg(long)]
    pub dry_run: bool,
}

impl GcArgs {
    /// The command's own options.
    pub fn into_command(self) -> GcCommand {
        GcCommand {
            sweep: self.sweep,
            results: self.results,
            dry_run: self.dry_run,
        }
    }
}

/// `pdsweep size`.
#[derive(Debug, Args)]
pub struct SizeArgs {
    /// Target non-embedding size such as 1.9B; derives a shape. Omit it and give --d-model,
    /// --n-layers, --n-heads and --d-ff for an explicit shape.
    #[arg(value_name = "SIZE", required_unless_present_any = ["d_model", "config"])]
    pub target: Option<String>,
    /// A released model's `config.json` (or its folder), of any family pdsweep loads: its
    /// exact parameter count as transformers counts it.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["target", "d_model"])]
    pub config: Option<std::path::PathBuf>,
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
            strict: self.strict,
            no_probe: self.no_probe,
        }
    }
}

impl SizeArgs {
    /// The command's own options.
    pub fn into_command(self) -> SizeCommand {
        SizeCommand {
            target: self.target,
            config: self.config,
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
    /// Instead of the tables, write every finished teacher, student and baseline as a Hugging
    /// Face model folder DIR/RUN_NAME (config.json, model.safetensors, tokenizer.json,
    /// README.md) that transformers loads with AutoModelForCausalLM.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["out", "format"])]
    pub models: Option<PathBuf>,
    /// With --models: only this run (its name or id); repeat for several.
    #[arg(long = "run", value_name = "NAME", requires = "models")]
    pub runs: Vec<String>,
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
            models: self.models,
            runs: self.runs,
        }
    }
}

/// `pdsweep sample`.
#[derive(Debug, Args)]
pub struct SampleArgs {
    /// The sweep file (or a sweep's name); without it, the only sweep under --results.
    pub sweep: Option<PathBuf>,
    /// Folder holding one sub-folder per sweep with its sweep.db.
    #[arg(long, default_value = "results", value_name = "DIR")]
    pub results: PathBuf,
    /// The run to sample from (its name or id).
    #[arg(long, value_name = "NAME")]
    pub run: String,
    /// Continue this text (tokenized by the run's tokenizer).
    #[arg(long, value_name = "TEXT", conflicts_with = "held_out")]
    pub prompt: Option<String>,
    /// Continue N prefixes of the held-out split, evenly spaced (the default, with N = 1).
    #[arg(long, value_name = "N")]
    pub held_out: Option<usize>,
    /// Tokens per held-out prefix.
    #[arg(long, default_value_t = 32, value_name = "T")]
    pub prefix_tokens: usize,
    /// Tokens to generate per prompt.
    #[arg(long, default_value_t = 200, value_name = "T")]
    pub tokens: usize,
    /// Sampling temperature; 0 is greedy.
    #[arg(long, default_value_t = 1.0)]
    pub temperature: f64,
    /// Sample only from the K most likely tokens (0: all).
    #[arg(long, default_value_t = 0, value_name = "K")]
    pub top_k: usize,
    /// Then only from the smallest set of most likely tokens with mass P.
    #[arg(long, default_value_t = 1.0, value_name = "P")]
    pub top_p: f64,
    /// Sampling seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Greedy decoding (the same as --temperature 0).
    #[arg(long)]
    pub greedy: bool,
    /// Print JSON (text and token ids per prompt, settings, throughput).
    #[arg(long)]
    pub json: bool,
}

impl SampleArgs {
    /// The command's own options.
    pub fn into_command(self) -> SampleCommand {
        let prompt = match self.prompt {
            Some(text) => PromptSource::Text(text),
            None => PromptSource::HeldOut {
                count: self.held_out.unwrap_or(1),
                tokens: self.prefix_tokens,
            },
        };
        SampleCommand {
            sweep: self.sweep,
            results: self.results,
            run: self.run,
            prompt,
            tokens: self.tokens,
            sampling: Sampling {
                temperature: if self.greedy { 0.0 } else { self.temperature },
                top_k: self.top_k,
                top_p: self.top_p,
            },
            seed: self.seed,
            json: self.json,
        }
    }
}

/// Laws `fit` knows.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LawArg {
    /// L = E + A/N^alpha + B/D^beta.
    Chinchilla,
    /// L = E + (A/N^alpha + B/D^beta)^gamma.
    Busbridge,
    /// Busbridge et al. (2025) Eq. 8 on (student_params, student_tokens, teacher_loss, student_loss).
    Distill,
}

/// Output formats of `fit` and `recommend`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ReportFormat {
    /// A readable table.
    Table,
    /// JSON.
    Json,
}

/// `pdsweep fit`.
#[derive(Debug, Args)]
pub struct FitArgs {
    /// The sweep file (its database is results/NAME/sweep.db).
    #[arg(required_unless_present_any = ["db", "data"])]
    pub sweep: Option<PathBuf>,
    /// A sweep database to fit instead of a sweep file's.
    #[arg(long, value_name = "PATH", conflicts_with = "sweep")]
    pub db: Option<PathBuf>,
    /// Folder holding one sub-folder per sweep with its sweep.db.
    #[arg(long, default_value = "results", value_name = "DIR")]
    pub results: PathBuf,
    /// Fit a CSV file instead of a sweep.
    #[arg(long, value_name = "FILE.csv", conflicts_with_all = ["sweep", "db"])]
    pub data: Option<PathBuf>,
    /// The law: for --data the law to fit (default chinchilla); on a sweep the supervised law.
    #[arg(long, value_enum)]
    pub law: Option<LawArg>,
    /// Map CSV columns: `ROLE=COLUMN,...`, e.g. "params=Model Size,tokens=Training Tokens".
    /// Roles: params, tokens, loss (or flops instead of tokens: D = C/(6N)); for distill
    /// student_params, student_tokens, teacher_loss, student_loss, supervised_loss.
    #[arg(long, value_name = "MAP")]
    pub columns: Option<String>,
    /// For a distillation CSV without a supervised_loss column: `busbridge2025` or
    /// "E=..,A=..,B=..,alpha=..,beta=..[,gamma=..]".
    #[arg(long, value_name = "LAW")]
    pub supervised: Option<String>,
    /// Huber delta on log residuals.
    #[arg(long, default_value_t = 1e-3)]
    pub delta: f64,
    /// Bootstrap resamples for the confidence intervals (0: none).
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub bootstrap: usize,
    /// Seed of the bootstrap.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Override start-grid axes: "alpha=0:2:0.5;e=-1,0,1" (theta names: a, b, e, alpha, beta,
    /// gamma; distill: a, b, alpha, beta, gamma, c0, ln_c1, ln_f1, ln_d1).
    #[arg(long, value_name = "SPEC")]
    pub grid: Option<String>,
    /// On a sweep: fit only the students and baselines of these seeds (teachers all), e.g. a
    /// split-half check `--seeds 1,3,5`; printed, not stored (a subset is not the sweep's answer).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "S,T,...",
        conflicts_with = "data"
    )]
    pub seeds: Option<Vec<u64>>,
    /// On a sweep: check a confirmation round against a prediction file written by
    /// `suggest --confirm SEEDS --predict FILE` (fits the round's seeds alone; stores nothing).
    #[arg(long, value_name = "PREDICTION", conflicts_with_all = ["data", "seeds"])]
    pub check: Option<PathBuf>,
    /// On a sweep: do not measure how distilled the students are (the distillation degrees
    /// against their same-seed baselines, measured once per model and stored).
    #[arg(long)]
    pub no_similarity: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: ReportFormat,
}

impl FitArgs {
    /// The command's own options.
    pub fn into_command(self) -> FitCommand {
        let target = match (self.data, self.db, self.sweep) {
            (Some(d), _, _) => FitTarget::Data(d),
            (_, Some(db), _) => FitTarget::Db(db),
            (_, _, Some(s)) => FitTarget::Sweep(s),
            (None, None, None) => FitTarget::Sweep(PathBuf::new()),
        };
        FitCommand {
            target,
            results: self.results,
            law: self.law.map(|l| match l {
                LawArg::Chinchilla => LawKind::Chinchilla,
                LawArg::Busbridge => LawKind::Busbridge,
                LawArg::Distill => LawKind::Distill,
            }),
            columns: self.columns,
            supervised: self.supervised,
            delta: self.delta,
            bootstrap: self.bootstrap,
            seed: self.seed,
            grid: self.grid,
            seeds: self.seeds,
            check: self.check,
            no_similarity: self.no_similarity,
            json: matches!(self.format, ReportFormat::Json),
        }
    }
}

/// Where `recommend` takes its laws from.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum RecommendLaw {
    /// Busbridge et al. (2025)'s published coefficients; no sweep needed.
    Busbridge2025,
}

/// `pdsweep recommend`.
#[derive(Debug, Args)]
pub struct RecommendArgs {
    /// The sweep file whose fits to use (run `pdsweep fit` on it first).
    #[arg(required_unless_present_any = ["db", "law"])]
    pub sweep: Option<PathBuf>,
    /// A sweep database instead of a sweep file's.
    #[arg(long, value_name = "PATH", conflicts_with = "sweep")]
    pub db: Option<PathBuf>,
    /// Folder holding one sub-folder per sweep with its sweep.db.
    #[arg(long, default_value = "results", value_name = "DIR")]
    pub results: PathBuf,
    /// Use published coefficients instead of a sweep.
    #[arg(long, value_enum, conflicts_with_all = ["sweep", "db"])]
    pub law: Option<RecommendLaw>,
    /// The student's non-embedding size, e.g. 1.9B.
    #[arg(long, value_name = "SIZE")]
    pub student: String,
    /// The student's training tokens, e.g. 100B (default: the sweep's student budget).
    #[arg(long, value_name = "D")]
    pub tokens: Option<String>,
    /// The teacher's training tokens (default: the sweep's teacher budget).
    #[arg(long, value_name = "D_T")]
    pub teacher_tokens: Option<String>,
    /// Part of the distillation-config key whose law to use (default: the one with most runs).
    #[arg(long, value_name = "TEXT")]
    pub config: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: ReportFormat,
}

impl RecommendArgs {
    /// The command's own options.
    pub fn into_command(self) -> RecommendCommand {
        let target = match (self.db, self.sweep) {
            (Some(db), _) => Some(FitTarget::Db(db)),
            (_, Some(s)) => Some(FitTarget::Sweep(s)),
            _ => None,
        };
        RecommendCommand {
            target,
            results: self.results,
            published: self.law.is_some(),
            student: self.student,
            tokens: self.tokens,
            teacher_tokens: self.teacher_tokens,
            config: self.config,
            json: matches!(self.format, ReportFormat::Json),
        }
    }
}

/// `pdsweep triage`.
#[derive(Debug, Args)]
pub struct TriageArgs {
    /// The sweep file whose finished teachers are the candidates (their held-out scores come
    /// from `pdsweep run`; a released teacher's run is one forward pass over the held-out text).
    #[arg(required_unless_present = "db")]
    pub sweep: Option<PathBuf>,
    /// A sweep database instead of a sweep file's.
    #[arg(long, value_name = "PATH", conflicts_with = "sweep")]
    pub db: Option<PathBuf>,
    /// Folder holding one sub-folder per sweep with its sweep.db.
    #[arg(long, default_value = "results", value_name = "DIR")]
    pub results: PathBuf,
    /// The student: a model label of the sweep (e.g. `10K`) or a non-embedding size.
    #[arg(long, value_name = "SIZE")]
    pub student: String,
    /// The optimal teacher's held-out bits per byte, `BPB` or `BPB:LO:HI`, instead of a fit.
    #[arg(long, value_name = "BPB[:LO:HI]", conflicts_with = "optimum_from")]
    pub optimal_bpb: Option<String>,
    /// The sweep file (or `.db`) whose fitted optimal teacher loss to rank against (default:
    /// the candidates' own sweep, after `pdsweep fit`).
    #[arg(long, value_name = "SWEEP")]
    pub optimum_from: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: ReportFormat,
}

impl TriageArgs {
    /// The command's own options.
    pub fn into_command(self) -> TriageCommand {
        let target = match (self.db, self.sweep) {
            (Some(db), _) => FitTarget::Db(db),
            (_, Some(s)) => FitTarget::Sweep(s),
            // clap requires one of them
            (None, None) => FitTarget::Sweep(PathBuf::new()),
        };
        let as_target = |p: PathBuf| match p.extension().and_then(|e| e.to_str()) {
            Some("db") => FitTarget::Db(p),
            _ => FitTarget::Sweep(p),
        };
        TriageCommand {
            target,
            results: self.results,
            student: self.student,
            optimal_bpb: self.optimal_bpb,
            optimum_from: self.optimum_from.map(as_target),
            json: matches!(self.format, ReportFormat::Json),
        }
    }
}

/// The compute backends, as `--backend` takes them.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum BackendArg {
    /// burn's pure-Rust CPU backend.
    Cpu,
    /// wgpu (Vulkan, Metal).
    Wgpu,
    /// CUDA.
    Cuda,
}

impl From<BackendArg> for pdsweep::spec::Backend {
    fn from(b: BackendArg) -> Self {
        match b {
            BackendArg::Cpu => pdsweep::spec::Backend::Cpu,
            BackendArg::Wgpu => pdsweep::spec::Backend::Wgpu,
            BackendArg::Cuda => pdsweep::spec::Backend::Cuda,
        }
    }
}

/// Training precisions, as `--precision` takes them.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PrecisionArg {
    /// Everything in f32.
    F32,
    /// bfloat16 matrix products.
    Bf16,
    /// float16 matrix products with loss scaling.
    F16,
}

impl From<PrecisionArg> for pdsweep::spec::Precision {
    fn from(p: PrecisionArg) -> Self {
        match p {
            PrecisionArg::F32 => pdsweep::spec::Precision::F32,
            PrecisionArg::Bf16 => pdsweep::spec::Precision::Bf16,
            PrecisionArg::F16 => pdsweep::spec::Precision::F16,
        }
    }
}

/// `pdsweep bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Where to run.
    #[arg(long, value_enum, default_value = "wgpu")]
    pub backend: BackendArg,
    /// Which GPU (see `pdsweep devices`).
    #[arg(long, default_value_t = 0)]
    pub device: usize,
    /// Arithmetic of the training step.
    #[arg(long, value_enum, default_value = "f32")]
    pub precision: PrecisionArg,
    /// Model width.
    #[arg(long, default_value_t = 768)]
    pub d_model: u64,
    /// Number of blocks.
    #[arg(long, default_value_t = 12)]
    pub n_layers: u64,
    /// Query heads.
    #[arg(long, default_value_t = 12)]
    pub n_heads: u64,
    /// Key/value heads (default: --n-heads).
    #[arg(long)]
    pub n_kv_heads: Option<u64>,
    /// SwiGLU hidden width.
    #[arg(long, default_value_t = 2048)]
    pub d_ff: u64,
    /// Vocabulary (GPT-2's by default).
    #[arg(long, default_value_t = 50257)]
    pub vocab: u64,
    /// Untie the output head from the embedding.
    #[arg(long)]
    pub untied: bool,
    /// Sequence length.
    #[arg(long, default_value_t = 1024)]
    pub context: u64,
    /// Sequences per step.
    #[arg(long, default_value_t = 16)]
    pub batch_seqs: u64,
    /// Steps measured.
    #[arg(long, default_value_t = 10)]
    pub steps: u64,
    /// Steps run first and not measured (kernel compilation, autotuning).
    #[arg(long, default_value_t = 3)]
    pub warmup: u64,
    /// Measure a logit pass keeping the top K (teacher forward and truncation) instead of
    /// training; 0 keeps the whole vocabulary (top-k "all").
    #[arg(long, value_name = "K")]
    pub logits: Option<u64>,
    /// The logit pass's top-p nucleus mass, in (0, 1].
    #[arg(long, value_name = "P", default_value_t = 1.0, requires = "logits")]
    pub top_p: f64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl BenchArgs {
    /// The command's own options.
    pub fn into_command(self) -> BenchCommand {
        BenchCommand {
            backend: self.backend.into(),
            device: self.device,
            spec: pdsweep::train::bench::BenchSpec {
                shape: pdsweep::model::ModelShape {
                    d_model: self.d_model,
                    n_layers: self.n_layers,
                    n_heads: self.n_heads,
                    n_kv_heads: self.n_kv_heads.unwrap_or(self.n_heads),
                    d_ff: self.d_ff,
                    vocab: self.vocab,
                    tie_embeddings: !self.untied,
                },
                context: self.context,
                batch_seqs: self.batch_seqs,
                steps: self.steps,
                warmup: self.warmup,
                precision: self.precision.into(),
                logits_top_k: self.logits.map(|k| match k {
                    0 => pdsweep::spec::TopK::All,
                    k => pdsweep::spec::TopK::Keep(k),
                }),
                logits_top_p: self.top_p,
            },
            json: self.json,
        }
    }
}

/// `pdsweep slurm`.
#[derive(Debug, Args)]
pub struct SlurmArgs {
    /// The sweep file, e.g. sweeps/quickstart.toml.
    pub sweep: PathBuf,
    /// Folder holding one sub-folder per sweep with its sweep.db (must be on a filesystem the
    /// nodes see).
    #[arg(long, default_value = "results", value_name = "DIR")]
    pub results: PathBuf,
    /// `--partition` of every job (overrides `[slurm] partition`).
    #[arg(long, value_name = "NAME")]
    pub partition: Option<String>,
    /// `--account` of every job.
    #[arg(long, value_name = "NAME")]
    pub account: Option<String>,
    /// `--qos` of every job.
    #[arg(long, value_name = "NAME")]
    pub qos: Option<String>,
    /// CPUs per job (`--cpus-per-task`).
    #[arg(long, value_name = "N")]
    pub cpus: Option<u64>,
    /// Memory per job, e.g. 16G.
    #[arg(long, value_name = "SIZE")]
    pub mem: Option<String>,
    /// GPUs per job (`--gres=gpu:N`).
    #[arg(long, value_name = "N")]
    pub gpus: Option<u64>,
    /// Time limit of every job: auto (from the plan), 90m, 2h, 1d or D-HH:MM:SS.
    #[arg(long, value_name = "TIME")]
    pub time: Option<String>,
    /// At most N tasks of each job array run at once (the `%` throttle).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_parallel: Option<u64>,
    /// Submissions of a run whose job ends without a result (killed, cancelled, node failure)
    /// before the run counts as failed (default 3).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_attempts: Option<u64>,
    /// Another `sbatch` option for every job, e.g. `--sbatch-option=--constraint=a100`
    /// (repeatable).
    #[arg(
        long = "sbatch-option",
        value_name = "OPTION",
        allow_hyphen_values = true
    )]
    pub sbatch_options: Vec<String>,
    /// Submit runs that failed before once more.
    #[arg(long)]
    pub retry_failed: bool,
    /// Seconds between looks at the jobs.
    #[arg(long, default_value_t = 15.0, value_name = "SECONDS")]
    pub poll: f64,
    /// Seconds a job must have ended before its missing result counts as a failed attempt (a
    /// network filesystem may show a job's last files late).
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    pub settle: f64,
    /// Submit, then exit without following the jobs (run the command again to follow them).
    #[arg(long)]
    pub detach: bool,
    /// Print the batch scripts that would be submitted; submit nothing, write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

impl SlurmArgs {
    /// The command's own options.
    pub fn into_command(self) -> SlurmCommand {
        SlurmCommand {
            sweep: self.sweep,
            results: self.results,
            partition: self.partition,
            account: self.account,
            qos: self.qos,
            cpus: self.cpus,
            mem: self.mem,
            gpus: self.gpus,
            time: self.time,
            max_parallel: self.max_parallel,
            max_attempts: self.max_attempts,
            sbatch_options: self.sbatch_options,
            retry_failed: self.retry_failed,
            poll_s: self.poll,
            settle_s: self.settle,
            detach: self.detach,
            dry_run: self.dry_run,
        }
    }
}

/// `pdsweep devices`.
#[derive(Debug, Args)]
pub struct DevicesArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl DevicesArgs {
    /// The command's own options.
    pub fn into_command(self) -> DevicesCommand {
        DevicesCommand { json: self.json }
    }
}

/// `pdsweep worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// The array's manifest (results/NAME/slurm/arrays/JOBNAME.json).
    pub manifest: PathBuf,
    /// The array index of the unit to execute (`$SLURM_ARRAY_TASK_ID`).
    #[arg(long)]
    pub index: u32,
}

impl WorkerArgs {
    /// The command's own options.
    pub fn into_command(self) -> WorkerCommand {
        WorkerCommand {
            manifest: self.manifest,
            index: self.index,
        }
    }
}

/// `pdsweep suggest`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("prediction_kind").args(["confirm", "student"])))]
pub struct SuggestArgs {
    /// The sweep file (its finished runs are fitted; its text is what the follow-up edits).
    pub sweep: PathBuf,
    /// Folder holding one sub-folder per sweep with its sweep.db.
    #[arg(long, default_value = "results", value_name = "DIR")]
    pub results: PathBuf,
    /// At most this many new runs (default 20).
    #[arg(long, value_name = "N", conflicts_with = "hours")]
    pub runs: Option<usize>,
    /// At most this many hours of new runs, one at a time, by the calibrated estimate.
    #[arg(long, value_name = "H")]
    pub hours: Option<f64>,
    /// Write the follow-up sweep file here (next to SWEEP; same name, same database).
    #[arg(long, value_name = "FILE")]
    pub write: Option<PathBuf>,
    /// Bootstrap resamples of the fits.
    #[arg(long, default_value_t = 200, value_name = "B")]
    pub bootstrap: usize,
    /// The T* interval width (97.5th / 2.5th percentile) that is good enough, e.g. 2: runs
    /// go to the curves expected wider than it, none to those already under it.
    #[arg(long, value_name = "W")]
    pub target_width: Option<f64>,
    /// Pre-register a confirmation round of these new seeds instead of searching for edits:
    /// every student and baseline with each seed, every measured teacher (e.g. `21-26` or
    /// `21,22,23`); with `--predict` the prediction file, with `--write` the round's sweep file.
    #[arg(long, value_name = "SEEDS", value_parser = parse_seed_list, conflicts_with_all = ["runs", "hours", "target_width"])]
    pub confirm: Option<SeedList>,
    /// Pre-register the optimal teacher of a student not yet run, of this many non-embedding
    /// parameters (e.g. `76440`, as `plan` prints N; a teacher-budget sweep): its optimal
    /// teacher loss and, at each teacher budget, its optimal teacher size, extrapolated from
    /// the measured students with intervals; with `--predict` the prediction file.
    #[arg(long, value_name = "N", value_parser = parse_student_params, conflicts_with_all = ["confirm", "runs", "hours", "target_width"])]
    pub student: Option<f64>,
    /// Write the prediction of `--confirm` or `--student` here (JSON; `fit --check` reads it).
    #[arg(long, value_name = "FILE", requires = "prediction_kind")]
    pub predict: Option<PathBuf>,
}

/// A student size for `suggest --student`: a count (`76440`, `76.4K`).
fn parse_student_params(text: &str) -> Result<f64, String> {
    let n = pdsweep::spec::units::parse_count(text)?;
    if n == 0 {
        return Err("a student has at least one parameter".into());
    }
    Ok(n as f64)
}

/// Seeds given as a list or ranges (`--confirm`).
#[derive(Debug, Clone)]
pub struct SeedList(pub Vec<u64>);

/// `21-26` or `21,22,23` (or a mix) as a sorted list of distinct seeds.
fn parse_seed_list(text: &str) -> Result<SeedList, String> {
    let mut seeds = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("`{part}` is not a seed or a range of seeds like 21-26");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u64, u64) = (
                    a.trim().parse().map_err(|_| bad())?,
                    b.trim().parse().map_err(|_| bad())?,
                );
                if a > b || b - a > 1000 {
                    return Err(bad());
                }
                seeds.extend(a..=b);
            }
            None => seeds.push(part.parse().map_err(|_| bad())?),
        }
    }
    seeds.sort_unstable();
    seeds.dedup();
    if seeds.is_empty() {
        return Err("give at least one seed".into());
    }
    Ok(SeedList(seeds))
}

impl SuggestArgs {
    /// The command's own options.
    pub fn into_command(self) -> SuggestCommand {
        let budget = match (self.runs, self.hours) {
            (_, Some(h)) => pdsweep::suggest::Budget::Seconds(h * 3600.0),
            (Some(n), None) => pdsweep::suggest::Budget::Runs(n),
            (None, None) => pdsweep::suggest::Budget::Runs(20),
        };
        SuggestCommand {
            sweep: self.sweep,
            results: self.results,
            goal: pdsweep::suggest::Goal {
                budget,
                target_width: self.target_width,
            },
            write: self.write,
            bootstrap: self.bootstrap,
            confirm: self.confirm.map(|s| s.0),
            student: self.student,
            predict: self.predict,
        }
    }
}

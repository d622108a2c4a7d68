//! The terminal view of `pdsweep run`: one progress bar per active run plus an overall bar,
//! and a line per evaluation, finished run and failure. It only consumes runner events.

use std::collections::HashMap;

use pdsweep::plan::RunId;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use pdsweep::run::RunEvent;
use pdsweep::spec::units::format_duration;
use pdsweep::train::TrainEvent;

/// Progress bars driven by [`RunEvent`]s.
pub struct ProgressView {
    multi: MultiProgress,
    overall: Option<ProgressBar>,
    bars: HashMap<RunId, (String, ProgressBar)>,
    /// The corpus last described, so it is described once.
    corpus: Option<String>,
    /// The time left last shown, and when.
    eta: Option<(f64, std::time::Instant)>,
}

impl ProgressView {
    /// A view drawing to standard error (hidden when it is not a terminal).
    pub fn new() -> Self {
        ProgressView {
            multi: MultiProgress::new(),
            overall: None,
            bars: HashMap::new(),
            corpus: None,
            eta: None,
        }
    }

    /// Seconds left to show for a fresh estimate of `one_at_a_time_s` with `jobs` runs at once
    /// (at most one per core helps): the mean of the fresh estimate and the last one shown minus
    /// the time since, so one surprising run moves the estimate halfway, not all the way.
    fn smoothed_eta(&mut self, one_at_a_time_s: f64, jobs: usize) -> f64 {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let fresh = one_at_a_time_s / jobs.clamp(1, cores) as f64;
        let shown = match self.eta {
            Some((last, at)) => {
                let projected = last - at.elapsed().as_secs_f64();
                if projected > 0.0 {
                    0.5 * (projected + fresh)
                } else {
                    fresh
                }
            }
            None => fresh,
        };
        self.eta = Some((shown, std::time::Instant::now()));
        shown
    }

    fn line(&self, text: String) {
        self.multi.suspend(|| eprintln!("{text}"));
    }

    /// Updates the view for `event`.
    pub fn handle(&mut self, event: RunEvent) {
        match event {
            RunEvent::Pending { runs } => {
                let bar = self.multi.add(ProgressBar::new(runs as u64));
                bar.set_style(style(
                    "{prefix:>10} [{bar:30}] {pos}/{len} runs  {elapsed_precise}  {msg}",
                ));
                bar.set_prefix("sweep");
                self.overall = Some(bar);
            }
            RunEvent::Eta {
                one_at_a_time_s,
                jobs,
            } => {
                if self.overall.is_some() && one_at_a_time_s.is_finite() {
                    let left = self.smoothed_eta(one_at_a_time_s, jobs);
                    if let Some(o) = &self.overall {
                        o.set_message(format!("about {} left", format_duration(left)));
                    }
                }
            }
            RunEvent::Preparing { id, name } => {
                let bar = self.multi.add(ProgressBar::new_spinner());
                bar.set_style(style("{prefix:>10} {spinner} {msg}"));
                bar.set_prefix(short(&id));
                bar.set_message(format!("{name}: preparing data"));
                bar.enable_steady_tick(Duration::from_millis(200));
                self.bars.insert(id, (name, bar));
            }
            RunEvent::DataReady { info, .. } => {
                if self.corpus.as_deref() != Some(info.description.as_str()) {
                    let bound = match info.entropy_rate_nats {
                        Some(h) => {
                            format!("; true entropy rate {h:.3} nats/token (no model can beat it)")
                        }
                        None => String::new(),
                    };
                    self.line(format!(
                        "data    {}: {} training and {} held-out tokens, unigram entropy {:.3} nats/token{bound}",
                        info.description, info.train_tokens, info.val_tokens, info.unigram_entropy_nats
                    ));
                    self.corpus = Some(info.description);
                }
            }
            RunEvent::Stacked { names, .. } => {
                self.line(format!(
                    "stack   {} runs train as one model: {}",
                    names.len(),
                    names.join(", ")
                ));
            }
            RunEvent::Started { .. } => {}
            RunEvent::Train { id, event } => self.train(&id, event),
            RunEvent::Finished {
                id,
                name,
                val_loss,
                wall_s,
                gain,
            } => {
                if let Some((_, bar)) = self.bars.remove(&id) {
                    bar.finish_and_clear();
                }
                if let Some(o) = &self.overall {
                    o.inc(1);
                }
                let gain = gain.map_or(String::new(), |g| format!(", {g:+.4} vs its baseline"));
                self.line(format!(
                    "done    {name}: held-out loss {val_loss:.4} nats/token{gain} in {wall_s:.1}s"
                ));
            }
            RunEvent::Failed { id, name, error } => {
                if let Some((_, bar)) = self.bars.remove(&id) {
                    bar.abandon();
                }
                if let Some(o) = &self.overall {
                    o.inc(1);
                }
                self.line(format!("FAILED  {name}: {error}"));
            }
        }
    }

    fn train(&mut self, id: &RunId, event: TrainEvent) {
        let Some((name, bar)) = self.bars.get(id) else {
            return;
        };
        match event {
            TrainEvent::Started { steps, start_step } => {
                bar.disable_steady_tick();
                bar.set_style(style(
                    "{prefix:>10} [{bar:30}] {pos}/{len} steps {msg} eta {eta}",
                ));
                bar.set_length(steps);
                bar.set_position(start_step);
                bar.reset_eta();
                let resumed = if start_step > 0 {
                    format!(" (resumed at step {start_step})")
                } else {
                    String::new()
                };
                bar.set_message(format!("{name}{resumed}"));
            }
            TrainEvent::Step {
                step,
                loss,
                tokens_per_s,
                ..
            } => {
                bar.set_position(step);
                bar.set_message(format!(
                    "{name} loss {loss:.3} {:.1}k tok/s",
                    tokens_per_s / 1e3
                ));
            }
            TrainEvent::Eval {
                step, loss, bpb, ..
            } => {
                let text = format!(
                    "eval    {name} step {step}: held-out {loss:.4} nats/token, {bpb:.4} bits/byte"
                );
                self.line(text);
            }
            TrainEvent::Checkpoint { .. } => {}
        }
    }

    /// Clears the bars.
    pub fn finish(&self) {
        if let Some(o) = &self.overall {
            o.finish_and_clear();
        }
    }
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

fn short(id: &RunId) -> String {
    id.as_str().chars().take(8).collect()
}

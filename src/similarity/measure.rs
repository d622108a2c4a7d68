//! Measuring a sweep: every finished student, its same-seed baseline and its teacher (against
//! itself) compared with the teacher under one [`Settings`], once: measurements are stored in
//! the sweep database and reused, so a second `fit` measures only what finished since. A run
//! whose model cannot be loaded is skipped with the reason, never failing the rest.

use crate::error::Cause;
use std::collections::{BTreeMap, BTreeSet};

use burn::tensor::Device;

use super::models::{TextOf, held_out_prefixes, load_model, run_data};
use super::profile::{Continuations, Settings, Similarity, compare, continuations};
use super::records::{self, Record, SampleText};
use super::token::{TokenSimilarity, token_similarity};
use crate::plan::{RunConfig, RunId, RunKind};
use crate::store::{RunRow, RunState, StoreError, SweepDb, SweepLayout};

/// Continuations kept as text per model, for the report.
const SAMPLES_KEPT: usize = 3;

/// What measuring a sweep gave.
#[derive(Debug, Default)]
pub struct Measured {
    /// Every measurement under the settings (stored before or made now).
    pub records: Vec<Record>,
    /// How many were made now.
    pub new: usize,
    /// Runs that could not be measured, and why.
    pub skipped: Vec<(String, String)>,
}

/// Why measuring could not go on at all.
#[derive(Debug, thiserror::Error)]
pub enum SimilarityError {
    /// The database could not be read or written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stored run configuration does not parse.
    #[error("run `{run}` has a configuration this pdsweep cannot read")]
    Config {
        /// The run.
        run: String,
        /// What went wrong.
        #[source]
        source: Cause,
    },
}

/// Measures what is missing under `settings` and returns every measurement; `progress` hears
/// of each model measured (its index from 1, how many are missing in all, its name).
pub fn measure(
    db: &SweepDb,
    layout: &SweepLayout,
    settings: &Settings,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<Measured, SimilarityError> {
    let key = settings.key();
    let Some(plan) = db.current_plan()? else {
        return Ok(Measured::default());
    };
    let rows = db.run_rows(plan)?;
    let by_id: BTreeMap<&RunId, &RunRow> = rows.iter().map(|r| (&r.id, r)).collect();
    let mut have: BTreeSet<(RunId, RunId)> = records::read(db, &key)?
        .into_iter()
        .map(|r| (r.run_id, r.reference_id))
        .collect();
    // per teacher, the models to compare with it: itself, its students, their baselines
    let mut wanted: BTreeMap<RunId, BTreeSet<RunId>> = BTreeMap::new();
    for s in rows
        .iter()
        .filter(|r| r.kind == RunKind::Student && r.state == RunState::Done)
    {
        let (Some(t), Some(b)) = (&s.teacher_id, &s.baseline_id) else {
            continue;
        };
        let done = |id: &RunId| by_id.get(id).is_some_and(|r| r.state == RunState::Done);
        if !done(t) || !done(b) {
            continue;
        }
        let set = wanted.entry(t.clone()).or_default();
        set.insert(t.clone());
        set.insert(s.id.clone());
        set.insert(b.clone());
    }
    let total: usize = wanted
        .iter()
        .map(|(t, models)| {
            models
                .iter()
                .filter(|m| !have.contains(&((*m).clone(), t.clone())))
                .count()
        })
        .sum();
    let mut done = 0;
    let mut out = Measured::default();
    let device = Device::flex();
    for (teacher, models) in &wanted {
        let missing: Vec<&RunId> = models
            .iter()
            .filter(|m| !have.contains(&((*m).clone(), teacher.clone())))
            .collect();
        if missing.is_empty() {
            continue;
        }
        let t_row = by_id[teacher];
        let mut ctx = match Teacher::load(t_row, layout, settings, &device) {
            Ok(ctx) => ctx,
            Err(reason) => {
                out.skipped
                    .push((t_row.name.clone(), crate::error::chain(reason.as_ref())));
                continue;
            }
        };
        for id in missing {
            let row = by_id[id];
            done += 1;
            progress(done, total, &row.name);
            match ctx.measure(row, layout, settings, &device) {
                Ok(record) => {
                    records::write(db, &key, &record)?;
                    have.insert((record.run_id.clone(), record.reference_id.clone()));
                    out.new += 1;
                }
                Err(reason) => out
                    .skipped
                    .push((row.name.clone(), crate::error::chain(reason.as_ref()))),
            }
        }
    }
    out.records = records::read(db, &key)?;
    Ok(out)
}

/// A teacher loaded once for all the models compared with it.
struct Teacher {
    id: RunId,
    model: crate::model::Transformer,
    continuations: Continuations,
    prefixes: Vec<Vec<u32>>,
    prepared: crate::data::Prepared,
    text: TextOf,
    /// The teacher's data: a model whose tokens differ is compared at the sequence measures.
    data: crate::data::DataConfig,
    context: usize,
}

fn config_of(row: &RunRow) -> Result<RunConfig, Cause> {
    serde_json::from_str(&row.config_json)
        .map_err(|e| crate::error::context("unreadable configuration", e))
}

impl Teacher {
    fn load(
        row: &RunRow,
        layout: &SweepLayout,
        settings: &Settings,
        device: &Device,
    ) -> Result<Teacher, Cause> {
        let config = config_of(row)?;
        let model = load_model(&config, &row.id, layout, device)?;
        let prepared = run_data(&config, layout)?;
        let text = TextOf::new(&config, layout.sweep_dir(), &layout.cache())?;
        let context = config.data.context as usize;
        let prefix_tokens = settings.prefix_tokens.min(context.saturating_sub(1)).max(1);
        let prefixes = held_out_prefixes(&prepared, settings.prefixes, prefix_tokens);
        if prefixes.is_empty() {
            return Err("the held-out split is shorter than one prefix".into());
        }
        let symbols = |t: &[u32]| text.symbols(t);
        let continuations = continuations(&model, &prefixes, settings, &symbols, device)?;
        Ok(Teacher {
            id: row.id.clone(),
            model,
            continuations,
            prefixes,
            prepared,
            text,
            data: config.data.clone(),
            context,
        })
    }

    /// `row`'s model against this teacher.
    fn measure(
        &mut self,
        row: &RunRow,
        layout: &SweepLayout,
        settings: &Settings,
        device: &Device,
    ) -> Result<Record, Cause> {
        let (similarity, tokens) = if row.id == self.id {
            let token = TokenSimilarity {
                agreement: 1.0,
                jsd: 0.0,
                positions: 0,
            };
            (
                compare(&self.continuations, &self.continuations, token),
                self.continuations.tokens.clone(),
            )
        } else {
            let config = config_of(row)?;
            let model = load_model(&config, &row.id, layout, device)?;
            if !config.data.same_tokens(&self.data) {
                return self.measure_across(row, &config, &model, layout, settings, device);
            }
            let symbols = |t: &[u32]| self.text.symbols(t);
            let mine = continuations(&model, &self.prefixes, settings, &symbols, device)?;
            let token = token_similarity(
                &model,
                &self.model,
                &self.prepared.val,
                self.context,
                settings.token_windows,
                device,
            );
            (compare(&mine, &self.continuations, token), mine.tokens)
        };
        Ok(Record {
            run_id: row.id.clone(),
            reference_id: self.id.clone(),
            similarity,
            samples: self.samples(&self.text, &tokens),
        })
    }

    /// `model`, of another vocabulary than this teacher's (a student across tokenizers, or its
    /// baseline), at the sequence granularities only: the teacher's prefixes as text, encoded by
    /// the model's tokenizer (their last `context − 1` tokens), continued and compared with the
    /// teacher's continuations on bytes.
    ///
    /// The token measures need one vocabulary: NaN.
    fn measure_across(
        &self,
        row: &RunRow,
        config: &RunConfig,
        model: &crate::model::Transformer,
        layout: &SweepLayout,
        settings: &Settings,
        device: &Device,
    ) -> Result<Record, Cause> {
        let text = TextOf::new(config, layout.sweep_dir(), &layout.cache())?;
        if !text.is_text() || !self.text.is_text() {
            return Err("its tokens are not its teacher's and there is no text to compare".into());
        }
        let keep = (config.data.context as usize).saturating_sub(1).max(1);
        let prefixes = self
            .prefixes
            .iter()
            .map(|p| {
                let mut tokens = text.encode(&self.text.text(p))?;
                tokens.drain(..tokens.len().saturating_sub(keep));
                if tokens.is_empty() {
                    return Err("a held-out prefix encodes to no tokens of its own".into());
                }
                Ok(tokens)
            })
            .collect::<Result<Vec<_>, Cause>>()?;
        let symbols = |t: &[u32]| text.symbols(t);
        let mine = continuations(model, &prefixes, settings, &symbols, device)?;
        let token = TokenSimilarity {
            agreement: f64::NAN,
            jsd: f64::NAN,
            positions: 0,
        };
        Ok(Record {
            run_id: row.id.clone(),
            reference_id: self.id.clone(),
            similarity: compare(&mine, &self.continuations, token),
            samples: self.samples(&text, &mine.tokens),
        })
    }

    /// The first few continuations as text (`text` decodes the model's tokens), each after
    /// its prefix.
    fn samples(&self, text: &TextOf, tokens: &[Vec<Vec<u32>>]) -> Vec<SampleText> {
        self.prefixes
            .iter()
            .zip(tokens)
            .take(SAMPLES_KEPT)
            .filter_map(|(p, per)| {
                per.first().map(|t| SampleText {
                    prefix: self.text.text(p),
                    text: text.text(t),
                })
            })
            .collect()
    }
}

/// A student's measurement with its baseline's and its teacher's, for degrees and the report.
#[derive(Debug, Clone)]
pub struct StudentSimilarity<'a> {
    /// The student's run.
    pub student: &'a RunRow,
    /// Against its teacher.
    pub student_similarity: &'a Similarity,
    /// Its same-seed baseline against the same teacher.
    pub baseline_similarity: &'a Similarity,
}

/// Each finished student of `rows` whose own and baseline's measurements are in `records`.
pub fn students<'a>(rows: &'a [RunRow], records: &'a [Record]) -> Vec<StudentSimilarity<'a>> {
    let find = |run: &RunId, reference: &RunId| {
        records
            .iter()
            .find(|r| &r.run_id == run && &r.reference_id == reference)
            .map(|r| &r.similarity)
    };
    rows.iter()
        .filter(|r| r.kind == RunKind::Student)
        .filter_map(|s| {
            let (t, b) = (s.teacher_id.as_ref()?, s.baseline_id.as_ref()?);
            Some(StudentSimilarity {
                student: s,
                student_similarity: find(&s.id, t)?,
                baseline_similarity: find(b, t)?,
            })
        })
        .collect()
}

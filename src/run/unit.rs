//! A unit of work: the runs one executor call trains (one run, or a stack of same-shape runs
//! trained as one batched model), each carrying every configuration it reads, so a unit can be
//! executed without the sweep database — a Slurm job reads its unit from a file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::error::RunError;
use super::tuning::{self, TunedLr};
use crate::plan::{RunConfig, RunId, RunKind};
use crate::store::{StoredRun, SweepDb};

/// The runs executed together by one executor call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkUnit {
    /// The runs, executed in this order (or together, for a stack).
    pub runs: Vec<UnitRun>,
    /// Whether the runs train as one stack (same shape, context and batch rows; see
    /// [`super::stacks`]) rather than one after the other.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stack: bool,
}

/// One run of a unit, with the configurations of the runs it reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnitRun {
    /// Run id.
    pub id: RunId,
    /// Run name.
    pub name: String,
    /// What it does.
    pub kind: RunKind,
    /// The resolved configuration as stored (JSON).
    pub config_json: String,
    /// Planned FLOPs.
    pub flops: f64,
    /// The runs that must be done before this one, in the plan's order.
    pub depends_on: Vec<RunId>,
    /// Configurations (JSON) of the runs this one reads — its teacher, its logit store — by id.
    pub related: BTreeMap<RunId, String>,
    /// A tuned run's learning rate (`[train] tune_lr`), resolved from the database when the
    /// unit was built: the chosen peak, or why none could be chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuned: Option<Result<TunedLr, String>>,
}

impl WorkUnit {
    /// A unit of the single run `run`, with the configurations it reads from `db`.
    pub fn single(db: &SweepDb, run: &StoredRun) -> Result<WorkUnit, RunError> {
        Ok(WorkUnit {
            runs: vec![UnitRun::load(db, run)?],
            stack: false,
        })
    }

    /// A stack of the same-shape runs `runs` (one run is a plain unit), with the
    /// configurations they read from `db`.
    pub fn stack(db: &SweepDb, runs: &[StoredRun]) -> Result<WorkUnit, RunError> {
        Ok(WorkUnit {
            runs: runs
                .iter()
                .map(|r| UnitRun::load(db, r))
                .collect::<Result<_, _>>()?,
            stack: runs.len() > 1,
        })
    }
}

impl UnitRun {
    /// `run` with the configurations of its dependencies and of its teacher, read from `db`.
    /// A referenced run missing from the database is left out (the run then fails saying so).
    pub fn load(db: &SweepDb, run: &StoredRun) -> Result<UnitRun, RunError> {
        let config = parse_config(&run.id, &run.config_json)?;
        let mut related = BTreeMap::new();
        for id in run.depends_on.iter().chain(teacher_of(&config)) {
            if !related.contains_key(id)
                && let Some(json) = db.run_config(id)?
            {
                related.insert(id.clone(), json);
            }
        }
        Ok(UnitRun {
            id: run.id.clone(),
            name: run.name.clone(),
            kind: run.kind,
            config_json: run.config_json.clone(),
            flops: run.flops,
            depends_on: run.depends_on.clone(),
            related,
            tuned: tuning::resolve(db, &config)?,
        })
    }

    /// The configuration the run executes: as planned, with a tuned learning rate in place.
    /// A tuned run whose rate could not be chosen fails (`Err`) saying why.
    pub fn config(&self) -> Result<RunConfig, RunError> {
        let mut config = parse_config(&self.id, &self.config_json)?;
        match &self.tuned {
            Some(Ok(tuned)) => tuning::apply(&mut config, tuned),
            Some(Err(reason)) => {
                return Err(RunError::Config {
                    id: self.id.to_string(),
                    source: reason.clone().into(),
                });
            }
            None => {}
        }
        Ok(config)
    }

    /// The tuned learning rate this run trains at, if its rate is tuned and could be chosen.
    pub fn tuned_lr(&self) -> Option<&TunedLr> {
        self.tuned.as_ref().and_then(|t| t.as_ref().ok())
    }

    /// The configuration of related run `id` (`Ok(None)` when the unit does not carry it).
    pub fn related_config(&self, id: &RunId) -> Result<Option<RunConfig>, RunError> {
        self.related
            .get(id)
            .map(|json| parse_config(id, json))
            .transpose()
    }
}

/// The teacher a student or logit pass reads, if any.
fn teacher_of(config: &RunConfig) -> Option<&RunId> {
    config
        .distill
        .as_ref()
        .map(|d| &d.teacher)
        .or_else(|| config.logits.as_ref().map(|l| &l.teacher))
}

fn parse_config(id: &RunId, json: &str) -> Result<RunConfig, RunError> {
    serde_json::from_str(json).map_err(|e| RunError::Config {
        id: id.to_string(),
        source: e.into(),
    })
}

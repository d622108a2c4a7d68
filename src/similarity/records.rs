//! Measurements in the sweep database (table `similarity`): read all of one setting, write one.
//! A row is a model (student, baseline, or a teacher against itself) measured against its
//! teacher, with a few of its continuations as text for the report.

use rusqlite::params;
use serde::{Deserialize, Serialize};

use super::profile::Similarity;
use crate::plan::RunId;
use crate::store::{StoreError, SweepDb};

/// A continuation as text, with the prefix it continues.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SampleText {
    /// The held-out prefix (decoded).
    pub prefix: String,
    /// The model's continuation (its first sample; decoded).
    pub text: String,
}

/// One stored measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The model measured.
    pub run_id: RunId,
    /// Its teacher (itself, for a teacher).
    pub reference_id: RunId,
    /// What was measured.
    pub similarity: Similarity,
    /// A few of its continuations.
    pub samples: Vec<SampleText>,
}

/// Every measurement made under settings `key`.
pub fn read(db: &SweepDb, key: &str) -> Result<Vec<Record>, StoreError> {
    let fail = |e| StoreError::sql(db.path(), "read similarity", e);
    let mut stmt = db
        .conn()
        .prepare(
            "SELECT run_id, reference_id, result_json, samples_json FROM similarity
             WHERE settings = ?1 ORDER BY run_id, reference_id",
        )
        .map_err(fail)?;
    let rows = stmt
        .query_map(params![key], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
            ))
        })
        .map_err(fail)?;
    let mut out = Vec::new();
    for row in rows {
        let (run, reference, result, samples) = row.map_err(fail)?;
        // a row this version cannot read (written by another) is measured again
        let (Ok(similarity), Ok(samples)) = (
            serde_json::from_str(&result),
            serde_json::from_str(&samples),
        ) else {
            continue;
        };
        out.push(Record {
            run_id: RunId::from_stored(run),
            reference_id: RunId::from_stored(reference),
            similarity,
            samples,
        });
    }
    Ok(out)
}

/// Stores `record` under settings `key` (replacing an earlier one of the same model,
/// reference and settings).
pub fn write(db: &SweepDb, key: &str, record: &Record) -> Result<(), StoreError> {
    let encode = |e: serde_json::Error| StoreError::Encode { source: e };
    let result = serde_json::to_string(&record.similarity).map_err(encode)?;
    let samples = serde_json::to_string(&record.samples).map_err(encode)?;
    db.conn()
        .execute(
            "INSERT OR REPLACE INTO similarity (run_id, reference_id, settings, result_json, samples_json)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![record.run_id.as_str(), record.reference_id.as_str(), key, result, samples],
        )
        .map_err(|e| StoreError::sql(db.path(), "write similarity", e))?;
    Ok(())
}

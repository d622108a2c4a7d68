//! The values that cross the store's boundary as types, not strings: a run's [`RunState`], and
//! how it, [`RunKind`] and [`RunId`] are written to and read from SQLite (as the words and ids
//! the schema has always held, so every existing database reads unchanged).

use std::fmt;

use serde::{Deserialize, Serialize};

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};

use crate::plan::{RunId, RunKind};

/// Where a run stands: planned → running → done, or failed (with its reason).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Not started (or handed back to be started again).
    #[default]
    Planned,
    /// Claimed by a process (or submitted to Slurm), with a heartbeat.
    Running,
    /// Finished; its result is recorded.
    Done,
    /// Failed; the reason is recorded.
    Failed,
}

impl RunState {
    /// Every state, in the order a run goes through them.
    pub const ALL: [RunState; 4] = [
        RunState::Planned,
        RunState::Running,
        RunState::Done,
        RunState::Failed,
    ];

    /// The word the database holds.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Planned => "planned",
            RunState::Running => "running",
            RunState::Done => "done",
            RunState::Failed => "failed",
        }
    }

    /// The state named by its word; `None` for any other text.
    pub fn parse(word: &str) -> Option<RunState> {
        RunState::ALL.into_iter().find(|s| s.as_str() == word)
    }

    /// Whether the run has ended, well or not.
    pub fn is_finished(self) -> bool {
        matches!(self, RunState::Done | RunState::Failed)
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A word read from a column that is not one of the values the column may hold.
fn unknown(what: &str, word: &str) -> FromSqlError {
    FromSqlError::Other(format!("unknown {what} `{word}`").into())
}

impl ToSql for RunState {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.as_str()))
    }
}

impl FromSql for RunState {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        let word = value.as_str()?;
        RunState::parse(word).ok_or_else(|| unknown("run state", word))
    }
}

impl ToSql for RunKind {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.as_str()))
    }
}

impl FromSql for RunKind {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        let word = value.as_str()?;
        RunKind::parse(word).ok_or_else(|| unknown("run kind", word))
    }
}

impl ToSql for RunId {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.as_str()))
    }
}

impl FromSql for RunId {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        Ok(RunId::from_stored(value.as_str()?.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_and_kinds_read_back_what_they_write() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (kind TEXT, state TEXT, id TEXT)")
            .unwrap();
        for (kind, state) in RunKind::ALL.into_iter().zip(RunState::ALL) {
            let id = RunId::from_stored(format!("{kind}-{state}"));
            conn.execute(
                "INSERT INTO t VALUES (?1, ?2, ?3)",
                rusqlite::params![kind, state, id],
            )
            .unwrap();
            let back: (RunKind, RunState, RunId, String) = conn
                .query_row(
                    "SELECT kind, state, id, state FROM t WHERE id = ?1",
                    [&id],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                )
                .unwrap();
            assert_eq!(back, (kind, state, id, state.as_str().to_string()));
        }
        conn.execute("INSERT INTO t VALUES ('teacher', 'lost', 'x')", [])
            .unwrap();
        let bad: rusqlite::Result<RunState> =
            conn.query_row("SELECT state FROM t WHERE id = 'x'", [], |r| r.get(0));
        let err = bad.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("unknown run state `lost`"), "{err}");
    }
}

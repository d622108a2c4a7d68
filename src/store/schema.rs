//! The sweep database's schema as an ordered list of migrations (tracked in SQLite's
//! `user_version`). Append new migrations; never edit a released one.

use rusqlite_migration::{M, Migrations};

/// Version 1: plans, runs, their dependencies, plan membership, and key–value metadata.
const V1: &str = r#"
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE plans (
    id              INTEGER PRIMARY KEY,
    sweep_hash      TEXT NOT NULL UNIQUE,
    sweep_name      TEXT NOT NULL,
    sweep_path      TEXT NOT NULL,
    sweep_toml      TEXT NOT NULL,
    pdsweep_version TEXT NOT NULL,
    created_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TABLE runs (
    id                   TEXT PRIMARY KEY,
    kind                 TEXT NOT NULL CHECK (kind IN ('teacher', 'logits', 'student', 'baseline')),
    name                 TEXT NOT NULL,
    config_json          TEXT NOT NULL,
    params_total         INTEGER NOT NULL,
    params_non_embedding INTEGER NOT NULL,
    tokens               INTEGER NOT NULL,
    flops                REAL NOT NULL,
    disk_bytes           INTEGER NOT NULL,
    state                TEXT NOT NULL DEFAULT 'planned'
                         CHECK (state IN ('planned', 'running', 'done', 'failed')),
    error                TEXT,
    first_plan           INTEGER NOT NULL REFERENCES plans(id),
    created_at           TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX runs_kind_state ON runs (kind, state);

CREATE TABLE run_deps (
    run_id     TEXT NOT NULL REFERENCES runs(id),
    depends_on TEXT NOT NULL REFERENCES runs(id),
    PRIMARY KEY (run_id, depends_on)
) WITHOUT ROWID;

CREATE TABLE plan_runs (
    plan_id INTEGER NOT NULL REFERENCES plans(id),
    run_id  TEXT NOT NULL REFERENCES runs(id),
    PRIMARY KEY (plan_id, run_id)
) WITHOUT ROWID;
"#;

/// Version 2: what runs record — per-step metrics, final results, corpus facts, and run
/// bookkeeping (start, finish, heartbeat, attempts).
const V2: &str = r#"
CREATE TABLE metrics (
    run_id       TEXT NOT NULL REFERENCES runs(id),
    kind         TEXT NOT NULL CHECK (kind IN ('train', 'val')),
    step         INTEGER NOT NULL,
    tokens       INTEGER NOT NULL,
    loss         REAL NOT NULL,
    bpb          REAL,
    lr           REAL,
    tokens_per_s REAL,
    wall_s       REAL NOT NULL,
    PRIMARY KEY (run_id, kind, step)
) WITHOUT ROWID;

CREATE TABLE results (
    run_id                 TEXT PRIMARY KEY REFERENCES runs(id),
    val_loss               REAL NOT NULL,
    val_bpb                REAL NOT NULL,
    train_loss             REAL,
    steps                  INTEGER NOT NULL,
    tokens                 INTEGER NOT NULL,
    wall_s                 REAL NOT NULL,
    tokens_per_s           REAL NOT NULL,
    flops                  REAL NOT NULL,
    peak_rss_bytes         INTEGER,
    backend                TEXT NOT NULL,
    corpus_json            TEXT NOT NULL,
    finished_at            TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

ALTER TABLE runs ADD COLUMN started_at TEXT;
ALTER TABLE runs ADD COLUMN finished_at TEXT;
ALTER TABLE runs ADD COLUMN heartbeat_at TEXT;
ALTER TABLE runs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
"#;

/// Version 3: distillation results — teacher–student agreement and KL for students, and
/// free-form facts (store bytes, bytes per kept logit) as JSON.
const V3: &str = r#"
ALTER TABLE results ADD COLUMN agreement REAL;
ALTER TABLE results ADD COLUMN kl_teacher_student REAL;
ALTER TABLE results ADD COLUMN extra_json TEXT;
"#;

/// Version 4: the distillation gain of each finished student over its matching baseline (same
/// model, tokens, data and optimiser settings; a baseline's configuration is its student's
/// without the teacher).
const V4: &str = r#"
CREATE VIEW student_gain AS
SELECT s.id AS run_id, b.id AS baseline_id, rb.val_loss - rs.val_loss AS gain
FROM runs s
JOIN results rs ON rs.run_id = s.id
JOIN runs b ON b.kind = 'baseline'
    AND json_extract(b.config_json, '$.model') = json_extract(s.config_json, '$.model')
    AND json_extract(b.config_json, '$.tokens') = json_extract(s.config_json, '$.tokens')
    AND json_extract(b.config_json, '$.data') = json_extract(s.config_json, '$.data')
    AND json_extract(b.config_json, '$.train') = json_extract(s.config_json, '$.train')
JOIN results rb ON rb.run_id = b.id
WHERE s.kind = 'student';
"#;

/// Version 5: which process runs a run (`host:pid`), so a run whose process died on this host
/// is taken over at once rather than after its heartbeat goes stale.
const V5: &str = "ALTER TABLE runs ADD COLUMN owner TEXT;";

/// Version 6: fitted laws, capacity-gap curves and T*(S) fits (`pdsweep fit`). Each fit is a
/// new row (history is kept); readers take the newest per (scope, key, law).
const V6: &str = r#"
CREATE TABLE fits (
    id           INTEGER PRIMARY KEY,
    law          TEXT NOT NULL,
    scope        TEXT NOT NULL,
    key          TEXT NOT NULL,
    params_json  TEXT NOT NULL,
    ci_json      TEXT NOT NULL,
    objective    REAL,
    n_points     INTEGER NOT NULL,
    points_json  TEXT NOT NULL,
    delta        REAL,
    bootstrap    INTEGER NOT NULL,
    seed         INTEGER NOT NULL,
    samples_json TEXT,
    result_json  TEXT NOT NULL,
    created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX fits_scope ON fits (scope, key, law, id);
"#;

/// Version 7: Slurm.
///
/// Each `sbatch` call (an array job) and each run's attempt in one, recorded before the call so a
/// coordinator that dies mid-submission finds its job by name; and each session of a run (a job's
/// start or restart after a requeue) with the step it resumed from.
const V7: &str = r#"
CREATE TABLE slurm_submissions (
    id           INTEGER PRIMARY KEY,
    job_name     TEXT NOT NULL UNIQUE,
    job_id       TEXT,
    kind         TEXT NOT NULL,
    script       TEXT NOT NULL,
    dependency   TEXT,
    submitted_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TABLE slurm_tasks (
    run_id      TEXT NOT NULL REFERENCES runs(id),
    attempt     INTEGER NOT NULL,
    submission  INTEGER NOT NULL REFERENCES slurm_submissions(id),
    array_index INTEGER NOT NULL,
    state       TEXT NOT NULL DEFAULT 'SUBMITTING',
    reason      TEXT,
    started     INTEGER NOT NULL DEFAULT 0,
    ended       INTEGER NOT NULL DEFAULT 0,
    updated_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (run_id, attempt)
) WITHOUT ROWID;
CREATE INDEX slurm_tasks_open ON slurm_tasks (ended, submission);

CREATE TABLE run_sessions (
    run_id     TEXT NOT NULL REFERENCES runs(id),
    session    TEXT NOT NULL,
    host       TEXT,
    start_step INTEGER,
    started_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (run_id, session)
) WITHOUT ROWID;
"#;

/// Version 8: the stack a running run trains in (`run --stack`: same-shape runs trained as one
/// batched model), as `LEAD_ID/MEMBERS`; NULL for a run trained alone.
const V8: &str = "ALTER TABLE runs ADD COLUMN stack TEXT;";

/// Version 9: a student whose learning rate is tuned (`[train] tune_lr`) is matched with the
/// baseline it recorded (`results.extra_json` → `lr.baseline`: its seed's baseline at the
/// chosen rate), since its planned optimiser settings name candidates rather than one rate.
const V9: &str = r#"
DROP VIEW student_gain;
CREATE VIEW student_gain AS
SELECT s.id AS run_id, b.id AS baseline_id, rb.val_loss - rs.val_loss AS gain
FROM runs s
JOIN results rs ON rs.run_id = s.id
JOIN runs b ON b.kind = 'baseline'
    AND json_extract(b.config_json, '$.model') = json_extract(s.config_json, '$.model')
    AND json_extract(b.config_json, '$.tokens') = json_extract(s.config_json, '$.tokens')
    AND json_extract(b.config_json, '$.data') = json_extract(s.config_json, '$.data')
    AND (
        (json_extract(s.config_json, '$.train.tune') IS NULL
            AND json_extract(b.config_json, '$.train') = json_extract(s.config_json, '$.train'))
        OR b.id = json_extract(rs.extra_json, '$.lr.baseline')
    )
JOIN results rb ON rb.run_id = b.id
WHERE s.kind = 'student';
"#;

/// Version 10: how distilled a student is (`crate::similarity`): each finished model measured
/// against its teacher (a teacher against itself) under one set of measurement settings (their
/// JSON, so other settings are measured anew), with a few of its continuations as text.
const V10: &str = r#"
CREATE TABLE similarity (
    run_id       TEXT NOT NULL REFERENCES runs(id),
    reference_id TEXT NOT NULL REFERENCES runs(id),
    settings     TEXT NOT NULL,
    result_json  TEXT NOT NULL,
    samples_json TEXT NOT NULL,
    created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    PRIMARY KEY (run_id, reference_id, settings)
) WITHOUT ROWID;
"#;

/// Every migration, oldest first.
pub fn migrations() -> Migrations<'static> {
    Migrations::new(vec![
        M::up(V1).foreign_key_check(),
        M::up(V2).foreign_key_check(),
        M::up(V3).foreign_key_check(),
        M::up(V4),
        M::up(V5),
        M::up(V6),
        M::up(V7).foreign_key_check(),
        M::up(V8),
        M::up(V9),
        M::up(V10).foreign_key_check(),
    ])
}

#[cfg(test)]
mod tests {
    #[test]
    fn migrations_are_valid() {
        assert!(super::migrations().validate().is_ok());
    }
}

//! Helpers shared by the integration tests: running the real binary and reading a database.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

/// The repository root (where `sweeps/` lives).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the `pdsweep` binary with `args` in `dir`.
pub fn pdsweep(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pdsweep"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the pdsweep binary runs")
}

/// Standard output as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Standard error as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every row of every table of the database, as text, in a stable order.
pub fn dump(db: &Path) -> String {
    let conn = rusqlite::Connection::open(db).expect("open db");
    let mut tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    tables.sort();
    let mut out = String::new();
    for table in tables {
        let mut stmt = conn
            .prepare(&format!("SELECT * FROM \"{table}\" ORDER BY 1, 2"))
            .unwrap();
        let columns = stmt.column_count();
        let rows = stmt
            .query_map([], |r| {
                let mut line = String::new();
                for i in 0..columns {
                    let v: rusqlite::types::Value = r.get(i)?;
                    line += &format!("{v:?}|");
                }
                Ok(line)
            })
            .unwrap();
        out += &format!("## {table}\n");
        for row in rows {
            out += &row.unwrap();
            out.push('\n');
        }
    }
    out
}

/// A results folder in `tmp` holding the sweep database of the SQL fixture
/// `tests/fixtures/NAME.sql` (as `results/NAME/sweep.db`).
pub fn load_fixture(tmp: &Path, name: &str) -> PathBuf {
    let results = tmp.join("results");
    let dir = results.join(name);
    std::fs::create_dir_all(&dir).expect("results folder");
    let sql = std::fs::read_to_string(root().join(format!("tests/fixtures/{name}.sql")))
        .expect("fixture");
    let conn = rusqlite::Connection::open(dir.join("sweep.db")).expect("db");
    conn.execute_batch(&sql).expect("load the fixture");
    results
}

/// The first wgpu device, or `None` (with the reason printed) where there is none and none is
/// required: `PDSWEEP_REQUIRE_WGPU=1` (set by `.ci/run`) makes a missing Vulkan device, or a
/// build without the `wgpu` feature, a failure instead of a skip.
pub fn wgpu_or_skip(test: &str) -> Option<burn::tensor::Device> {
    let required = std::env::var("PDSWEEP_REQUIRE_WGPU").is_ok_and(|v| v == "1");
    let why = if !cfg!(feature = "wgpu") {
        "this build has no `wgpu` feature".to_string()
    } else {
        match pdsweep::train::device_for(pdsweep::spec::Backend::Wgpu, 0) {
            Ok(device) => return Some(device),
            Err(e) => e.to_string(),
        }
    };
    assert!(!required, "{test}: PDSWEEP_REQUIRE_WGPU=1 but {why}");
    eprintln!("skipped {test}: {why}");
    None
}

/// burn's device seed is process-wide, and every integration test runs in this one process:
/// a test that seeds the device and builds a model from it holds this lock, so no other test
/// draws from the same stream meanwhile.
pub static RNG: Mutex<()> = Mutex::new(());

/// `root/books/` with these plays of the shared Shakespeare corpus, or `None` (the test says it
/// is skipped) where the corpus is not there.
pub fn shakespeare_plays(root: &Path, plays: &[&str]) -> Option<()> {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/shakespeare");
    if !source.is_dir() {
        eprintln!("skipped: {} is not there", source.display());
        return None;
    }
    std::fs::create_dir_all(root.join("books")).unwrap();
    for play in plays {
        std::fs::copy(source.join(play), root.join("books").join(play)).unwrap();
    }
    Some(())
}

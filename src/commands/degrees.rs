//! The distillation degrees `pdsweep fit` prints: every finished student, its baseline and its
//! teacher measured once (stored in the sweep database; later fits measure only what is new),
//! then one line per student setting with the degree at each granularity and its interval
//! over seeds.

use std::path::Path;

use comfy_table::Table;
use comfy_table::presets::UTF8_BORDERS_ONLY;
use pdsweep::similarity::{self, Settings};
use pdsweep::spec::Sweep;
use pdsweep::store::{SweepDb, SweepLayout};

/// Measures what is missing for the sweep of `file` and prints the degrees (in `json` mode
/// it measures and stores them for `export` and `report` without printing).
pub fn measure_and_print(
    file: &Path,
    results: &Path,
    db: &SweepDb,
    json: bool,
) -> anyhow::Result<()> {
    let sweep = Sweep::load(file)?;
    let layout = SweepLayout::for_file(file, results, sweep.file.name.as_str());
    let settings = Settings::default();
    let start = std::time::Instant::now();
    let measured = similarity::measure(db, &layout, &settings, &mut |i, n, name| {
        let eta = if i > 1 {
            let per = start.elapsed().as_secs_f64() / (i - 1) as f64;
            format!(", about {:.0} s left", per * (n + 1 - i) as f64)
        } else {
            String::new()
        };
        eprintln!("measuring similarity {i}/{n}: {name}{eta} (`--no-similarity` skips)");
    })?;
    if json {
        return Ok(());
    }
    let plan = db.current_plan()?;
    let rows = match plan {
        Some(p) => db.run_rows(p)?,
        None => Vec::new(),
    };
    let groups = similarity::group_degrees(&rows, &measured.records);
    for line in skipped_lines(&measured.skipped) {
        println!("{line}");
    }
    if groups.is_empty() {
        return Ok(());
    }
    println!();
    println!(
        "distillation degree (student − its same-seed baseline, towards the teacher; mean [95% over seeds]):"
    );
    println!(
        "  token: top-1 agreement and −JSD, teacher-forced on {} held-out windows; sequence: chrF1 of {}-token continuations of {} held-out prefixes × {} seeds; homogenisation: self-similarity gap to the teacher's",
        settings.token_windows, settings.continuation_tokens, settings.prefixes, settings.samples
    );
    let mut table = Table::new();
    table.load_style(UTF8_BORDERS_ONLY);
    table.set_header(vec![
        "student",
        "seeds",
        "agreement",
        "JSD",
        "chrF",
        "homogenisation",
    ]);
    for g in &groups {
        let s = &g.summary;
        table.add_row(vec![
            g.group.clone(),
            s.seeds.to_string(),
            s.agreement.render(),
            s.jsd.render(),
            s.chrf.render(),
            s.homogenisation.render(),
        ]);
    }
    println!("{table}");
    if measured.new > 0 {
        println!(
            "({} models measured now, stored in the sweep database)",
            measured.new
        );
    }
    Ok(())
}

/// The runs similarity skipped, one line per reason (a sweep across tokenizers skips dozens
/// for the same one), naming at most a few runs of each.
fn skipped_lines(skipped: &[(String, String)]) -> Vec<String> {
    const NAMED: usize = 3;
    let mut by_reason: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for (name, reason) in skipped {
        let names = by_reason.entry(reason).or_default();
        if !names.contains(&name.as_str()) {
            names.push(name);
        }
    }
    by_reason
        .into_iter()
        .map(|(reason, names)| match names.as_slice() {
            [one] => format!("similarity: skipped {one}: {reason}"),
            _ => {
                let more = names.len().saturating_sub(NAMED);
                let shown = names[..names.len().min(NAMED)].join(", ");
                let more = if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                };
                format!(
                    "similarity: skipped {} runs ({reason}): {shown}{more}",
                    names.len()
                )
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::skipped_lines;

    #[test]
    fn skipped_runs_are_grouped_by_reason() {
        let s = |a: &str, b: &str| (a.to_string(), b.to_string());
        let skipped = [
            s("a", "other vocabulary"),
            s("b", "other vocabulary"),
            s("a", "other vocabulary"),
            s("c", "other vocabulary"),
            s("d", "other vocabulary"),
            s("e", "no checkpoint"),
        ];
        assert_eq!(
            skipped_lines(&skipped),
            [
                "similarity: skipped e: no checkpoint",
                "similarity: skipped 4 runs (other vocabulary): a, b, c and 1 more",
            ]
        );
    }
}

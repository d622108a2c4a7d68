//! How distilled the students are: each student's similarity to its teacher (chrF1 of their
//! continuations of the same held-out prefixes; left) and teacher-forced top-1 agreement
//! (right) against teacher size, one row of panels per student size, with the same-seed
//! baselines' similarity to the same teacher as the reference line: the gap between a
//! student's markers and the dashed line is its distillation degree.

use super::Figure;
use crate::plan::RunKind;
use crate::report::canvas::Area;
use crate::report::data::{ReportData, RunView};
use crate::report::error::ReportError;
use crate::report::style::{
    self, Axis, INK, LegendEntry, LineKind, Marker, TickFormat, color, panel, replicates,
    with_legend,
};
use crate::similarity::Similarity;

/// One measured model: its teacher's size and its similarity to that teacher.
#[derive(Clone)]
struct Point {
    teacher: crate::plan::RunId,
    teacher_n: f64,
    student_n: f64,
    /// The students' distillation setting (their series), `None` for a baseline.
    config: Option<String>,
    similarity: Similarity,
}

/// The similarity figure.
pub(crate) struct SimilarityFigure {
    points: Vec<Point>,
    configs: Vec<String>,
    students: Vec<f64>,
    /// Whether every series has the same teachers: one baseline line serves them all;
    /// otherwise (teachers of another tokenizer) each series gets its own, in its colour.
    shared_teachers: bool,
}

impl SimilarityFigure {
    /// Title on the report page.
    pub const TITLE: &'static str = "How distilled are the students";

    /// Measured students and baselines; an error when `fit` has measured none.
    pub fn build(data: &ReportData) -> Result<Self, String> {
        let view = |id: &crate::plan::RunId| data.runs.iter().find(|r| &r.id == id);
        let mut points = Vec::new();
        for rec in &data.similarity.records {
            let (Some(run), Some(teacher)) = (view(&rec.run_id), view(&rec.reference_id)) else {
                continue;
            };
            let config = match run.kind {
                RunKind::Student => Some(config_label(run)),
                RunKind::Baseline => None,
                _ => continue,
            };
            points.push(Point {
                teacher: teacher.id.clone(),
                teacher_n: teacher.n,
                student_n: run.n,
                config,
                similarity: rec.similarity,
            });
        }
        if !points.iter().any(|p| p.config.is_some()) {
            return Err(
                "no student's similarity to its teacher is measured yet (run `pdsweep fit`)".into(),
            );
        }
        let mut configs: Vec<String> = points.iter().filter_map(|p| p.config.clone()).collect();
        configs.sort();
        configs.dedup();
        let teachers_of = |c: &String| {
            let mut t: Vec<&crate::plan::RunId> = points
                .iter()
                .filter(|p| p.config.as_ref() == Some(c))
                .map(|p| &p.teacher)
                .collect();
            t.sort();
            t.dedup();
            t
        };
        let shared_teachers = configs
            .windows(2)
            .all(|w| teachers_of(&w[0]) == teachers_of(&w[1]));
        let mut students: Vec<f64> = points.iter().map(|p| p.student_n).collect();
        students.sort_by(f64::total_cmp);
        students.dedup();
        Ok(SimilarityFigure {
            points,
            configs,
            students,
            shared_teachers,
        })
    }
}

fn config_label(run: &RunView) -> String {
    if run.distill.is_empty() {
        "distilled student".into()
    } else {
        run.distill.clone()
    }
}

impl Figure for SimilarityFigure {
    fn name(&self) -> &'static str {
        "similarity"
    }

    fn title(&self) -> &'static str {
        Self::TITLE
    }

    fn caption(&self) -> String {
        "Each distilled student's similarity to its teacher against the teacher's size, one row \
         per student size: left, chrF1 (byte n-grams, orders 1–4) between the student's and the \
         teacher's sampled continuations of the same held-out prefixes under the same seeds; \
         right, teacher-forced top-1 agreement on held-out text. Markers are seed means (bars \
         their range, faint dots the seeds); the dashed line is the same-seed baselines' \
         similarity to the same teachers (black, or in each series' colour where the series have \
         different teachers), the reference point: the gap between a student and \
         that line is its distillation degree (intervals in `pdsweep fit` and the exported \
         `degrees` table)."
            .into()
    }

    fn size_in(&self) -> (f64, f64) {
        (style::WIDTH_IN, style::height_in(self.students.len()))
    }

    fn draw(&self, area: &Area<'_>) -> Result<(), ReportError> {
        let mut entries: Vec<LegendEntry> = self
            .configs
            .iter()
            .enumerate()
            .map(|(i, c)| LegendEntry::series(c.clone(), color(i), Some(Marker::nth(i))))
            .collect();
        entries.push(LegendEntry::line(
            if self.shared_teachers {
                "same-seed baseline"
            } else {
                "baseline per series"
            },
            INK,
            LineKind::Dashed,
        ));
        let plot_area = with_legend(area, &entries, 1.9)?;
        let panels = style::grid(&plot_area, 2 * self.students.len(), 2);
        type Measure = (&'static str, fn(&Similarity) -> f64, TickFormat);
        let measures: [Measure; 2] = [
            ("chrF1 to the teacher", |s| s.chrf, TickFormat::Plain),
            ("Top-1 agreement", |s| s.agreement, TickFormat::Percent),
        ];
        for (row, &student) in self.students.iter().enumerate() {
            let here: Vec<&Point> = self
                .points
                .iter()
                .filter(|p| p.student_n == student)
                .collect();
            for (col, (label, value, format)) in measures.iter().enumerate() {
                let x = Axis::log(
                    "Teacher non-embedding parameters",
                    here.iter().map(|p| p.teacher_n).collect::<Vec<_>>(),
                    TickFormat::Si,
                );
                // a measure that does not apply (the token ones across tokenizers) is NaN
                let y = Axis::linear(
                    label,
                    here.iter()
                        .map(|p| value(&p.similarity))
                        .filter(|v| v.is_finite())
                        .collect::<Vec<_>>(),
                    *format,
                );
                let title = format!("student {}", crate::report::numbers::si(student));
                let mut plot = panel(&panels[2 * row + col], &title, x, y)?;
                // the baselines against the teachers of each series (all series at once
                // when they share their teachers)
                let lines: Vec<(Option<&String>, plotters::style::RGBColor)> =
                    if self.shared_teachers {
                        vec![(None, INK)]
                    } else {
                        self.configs
                            .iter()
                            .enumerate()
                            .map(|(i, c)| (Some(c), color(i)))
                            .collect()
                    };
                for (series, ink) in lines {
                    let teachers: Vec<&crate::plan::RunId> = here
                        .iter()
                        .filter(|p| series.is_none_or(|c| p.config.as_ref() == Some(c)))
                        .map(|p| &p.teacher)
                        .collect();
                    let baseline: Vec<(f64, f64)> = here
                        .iter()
                        .filter(|p| p.config.is_none() && teachers.contains(&&p.teacher))
                        .map(|p| (p.teacher_n, value(&p.similarity)))
                        .filter(|(_, v)| v.is_finite())
                        .collect();
                    let reps = replicates(&baseline);
                    let means: Vec<(f64, f64)> = reps.iter().map(|r| (r.x, r.mean)).collect();
                    if means.len() == 1 {
                        plot.hline(means[0].1, ink, LineKind::Dashed)?;
                    } else if !means.is_empty() {
                        plot.line(&means, ink, LineKind::Dashed, 1.0)?;
                    }
                }
                for (i, c) in self.configs.iter().enumerate() {
                    let pts: Vec<(f64, f64)> = here
                        .iter()
                        .filter(|p| p.config.as_ref() == Some(c))
                        .map(|p| (p.teacher_n, value(&p.similarity)))
                        .filter(|(_, v)| v.is_finite())
                        .collect();
                    let reps = replicates(&pts);
                    let means: Vec<(f64, f64)> = reps.iter().map(|r| (r.x, r.mean)).collect();
                    plot.line(&means, color(i), LineKind::Solid, 1.0)?;
                    plot.replicates(&reps, color(i), Marker::nth(i), style::filled(i))?;
                }
            }
        }
        Ok(())
    }
}

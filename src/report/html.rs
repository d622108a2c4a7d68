//! The report page `index.html`: one self-contained file (figures as inline SVG, the font cut
//! down to the page's characters as a data URL, no scripts, nothing fetched) with what is
//! missing, the recommendation with its caveats, every figure, fitted parameters with
//! intervals and `fit`'s warnings, the corpus, the runs and their results, the sweep file and
//! provenance.

use std::fmt::{self, Write as _};

use super::data::{GapVerdict, LawView, ReportData, RunState, RunView, TrendView, sig};
use super::figures::Figure;
use super::numbers::si;
use super::render::{Rendered, font_face_css};
use crate::plan::RunKind;

/// A drawn figure with what the page says about it.
pub struct PageFigure<'a> {
    /// The figure.
    pub figure: &'a dyn Figure,
    /// Its drawings.
    pub rendered: &'a Rendered,
}

/// A figure left out, and why.
pub struct PageSkip<'a> {
    /// Title.
    pub title: &'a str,
    /// What is missing.
    pub reason: &'a str,
}

/// Escapes text for HTML.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Text with `backticked` spans set as code (the rest escaped).
fn rich(s: &str) -> String {
    s.split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 1 {
                format!("<code>{}</code>", esc(part))
            } else {
                esc(part)
            }
        })
        .collect()
}

const CSS: &str = r#"
:root{--ink:#222;--muted:#666;--line:#ddd;--accent:#0072b2;--warn:#fff6e0;--warnline:#e6a700}
*{box-sizing:border-box}
body{font-family:'DejaVu Sans',sans-serif;color:var(--ink);max-width:1180px;margin:0 auto;padding:24px 28px 60px;line-height:1.45;font-size:15px;background:#fff}
h1{font-size:26px;margin:0 0 4px}h2{font-size:20px;margin:36px 0 10px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:16px;margin:20px 0 6px}
.sub{color:var(--muted);margin:0 0 18px}
code,pre{font-family:'DejaVu Sans Mono',monospace;font-size:13px}
code{background:#f3f3f3;padding:1px 4px;border-radius:3px}
pre{background:#f7f7f7;border:1px solid var(--line);padding:12px;overflow-x:auto;white-space:pre}
.missing{background:var(--warn);border-left:4px solid var(--warnline);padding:10px 16px;margin:16px 0}
.missing ul{margin:6px 0 0;padding-left:20px}
.answer{background:#eef6fb;border-left:4px solid var(--accent);padding:10px 16px}
.caveats{background:var(--warn);border-left:4px solid var(--warnline);padding:8px 16px;margin:10px 0}
.caveats ul{margin:4px 0 0;padding-left:20px}
.warn{color:#8a5a00}
td.ni{color:#8a5a00;font-style:italic}
figure{margin:18px 0 30px}
figure .fig{border:1px solid #eee}figure svg{width:100%;height:auto;display:block}
h1 code{font-size:inherit;background:none;padding:0}
figcaption{color:#333;font-size:14px;margin-top:6px}
figcaption .files{color:var(--muted);font-size:13px}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
th,td{border-bottom:1px solid var(--line);padding:4px 8px;text-align:right;white-space:nowrap}
th{background:#f5f5f5;position:sticky;top:0}
td.l,th.l{text-align:left}
.scroll{overflow-x:auto;max-width:100%}
tr.failed td{background:#fdecea}tr.planned td,tr.running td{color:var(--muted)}
dl{display:grid;grid-template-columns:max-content 1fr;gap:4px 16px}dt{color:var(--muted)}dd{margin:0;word-break:break-all}
nav a{margin-right:14px}
"#;

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| "–".to_string(), f)
}

fn loss(v: f64) -> String {
    format!("{v:.4}")
}

/// Builds the page.
pub fn page(
    data: &ReportData,
    figures: &[PageFigure],
    skipped: &[PageSkip],
    missing: &[String],
) -> String {
    let mut h = String::new();
    // Why `expect`: a `String`'s `fmt::Write` never fails, so an error could only come from a
    // `Display` impl of ours returning one, which none does: a bug, not an input.
    body(&mut h, data, figures, skipped, missing).expect("formatting into a String cannot fail");
    let name = esc(&data.sweep.name);
    // The font is cut down to the characters the page shows (figures included).
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>pdsweep report: {name}</title>\n<style>{}{CSS}</style>\n</head>\n<body>\n{h}</body>\n</html>\n",
        font_face_css(&super::render::svg_text(&h))
    )
}

/// The page's body, section by section.
fn body(
    h: &mut String,
    data: &ReportData,
    figures: &[PageFigure],
    skipped: &[PageSkip],
    missing: &[String],
) -> fmt::Result {
    let name = esc(&data.sweep.name);
    writeln!(h, "<h1>Sweep <code>{name}</code></h1>")?;
    let done = data
        .runs
        .iter()
        .filter(|r| r.state == RunState::Done)
        .count();
    writeln!(
        h,
        "<p class=\"sub\">{}{done} of {} runs done · report drawn {} by pdsweep {}</p>",
        data.sweep
            .description
            .as_deref()
            .map_or(String::new(), |d| format!("{} · ", esc(d))),
        data.runs.len(),
        esc(&data.provenance.date_utc),
        esc(&data.provenance.pdsweep_version),
    )?;
    *h += "<nav><a href=\"#answer\">Recommendation</a><a href=\"#figures\">Figures</a>\
          <a href=\"#fits\">Fitted parameters</a><a href=\"#corpus\">Corpus</a>\
          <a href=\"#runs\">Runs</a><a href=\"#config\">Configuration</a>\
          <a href=\"#provenance\">Provenance</a></nav>\n";
    if !missing.is_empty() {
        *h +=
            "<div class=\"missing\" id=\"missing\"><strong>Missing from this report</strong><ul>\n";
        for m in missing {
            writeln!(h, "<li>{}</li>", rich(m))?;
        }
        *h += "</ul></div>\n";
    }
    recommendation(h, data)?;
    *h += "<h2 id=\"figures\">Figures</h2>\n";
    for f in figures {
        let stem = esc(&f.rendered.name);
        // 1 inch of figure = 110 CSS pixels, so text has one size in every figure.
        let width_px = (f.figure.size_in().0 * 110.0).round();
        write!(
            h,
            "<figure id=\"fig-{stem}\">\n<h3>{}</h3>\n<div class=\"fig\" style=\"max-width:{width_px}px\">{}</div>\n<figcaption>{} \
             <span class=\"files\">Files: <a href=\"{stem}.png\">{stem}.png</a> (300 dpi), \
             <a href=\"{stem}.svg\">{stem}.svg</a>.</span></figcaption>\n</figure>\n",
            esc(f.figure.title()),
            strip_xml_decl(&f.rendered.svg_bare),
            rich(&f.figure.caption()),
        )?;
    }
    if !skipped.is_empty() {
        *h += "<h3>Figures not drawn</h3><ul>\n";
        for s in skipped {
            writeln!(h, "<li>{}: {}</li>", esc(s.title), rich(s.reason))?;
        }
        *h += "</ul>\n";
    }
    fits(h, data)?;
    degrees(h, data)?;
    learning_rates(h, data)?;
    corpus(h, data)?;
    runs(h, data)?;
    write!(
        h,
        "<h2 id=\"config\">Sweep configuration</h2>\n<p>From <code>{}</code>:</p>\n<pre>{}</pre>\n",
        esc(&data.sweep.path),
        esc(&data.sweep.toml)
    )?;
    provenance(h, data)
}

fn strip_xml_decl(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => svg,
    }
}

/// The page's answer: the recommendation when one was computed, else what the fitted curves
/// (or, before any fit, the grid) say about each student's optimal teacher; then the caveats.
fn recommendation(h: &mut String, data: &ReportData) -> fmt::Result {
    h.push_str("<h2 id=\"answer\">Recommendation</h2>\n");
    if let Some(r) = &data.fits.recommendation {
        recommended(h, r)?;
    } else {
        h.push_str(&fit_status(data));
        let judged: Vec<_> = data
            .fits
            .capacity_gap
            .iter()
            .filter(|g| g.t_star.is_some() || g.verdict.is_some())
            .collect();
        if !judged.is_empty() {
            fitted_optima(h, &judged)?;
        } else {
            grid_optima(h, &data.fits.optimal_teacher.points)?;
        }
    }
    caveats(h, data)?;
    Ok(())
}

/// The recommendation for the sweep's student: the teacher, its interval, and what it predicts.
fn recommended(h: &mut String, r: &super::data::RecommendationView) -> fmt::Result {
    write!(
        h,
        "<div class=\"answer\"><p>For a student of <strong>{}</strong> non-embedding parameters{}, \
         the optimal teacher has <strong>{}</strong> non-embedding parameters \
         (interval {} – {}){}.</p><ul>",
        si(r.student_n),
        r.tokens
            .map_or(String::new(), |t| format!(" trained on {} tokens", si(t))),
        si(r.teacher_n.value),
        si(r.teacher_n.lo),
        si(r.teacher_n.hi),
        if r.extrapolation {
            ", <strong>an extrapolation</strong> beyond the student sizes of the sweep"
        } else {
            ""
        },
    )?;
    if let Some(l) = r.predicted_loss {
        write!(h, "<li>Predicted student loss: {l:.4} nats/token</li>")?;
    }
    if let Some(g) = r.predicted_gain {
        write!(
            h,
            "<li>Predicted gain over no teacher: {g:.4} nats/token</li>"
        )?;
    }
    if let Some(c) = r.teacher_cost_flops {
        write!(
            h,
            "<li>Cost of pre-training that teacher: {c:.2e} FLOPs</li>"
        )?;
    }
    if !r.note.is_empty() {
        write!(h, "<li>{}</li>", rich(&r.note))?;
    }
    h.push_str("</ul></div>\n");
    Ok(())
}

/// Without a recommendation: the opening of the answer box, saying how far the fits got.
fn fit_status(data: &ReportData) -> String {
    let text = if data.fits.any_fit() && data.fits.distill.is_empty() {
        "The fits are below, but without a distillation law \
         (see <a href=\"#fits\">Fitted parameters</a> for why) <code>pdsweep recommend</code> \
         cannot answer for other student sizes."
    } else if data.fits.any_fit() {
        "The fits are below; <code>pdsweep recommend</code> answers \
         for a student size, inside the sweep or beyond it."
    } else if data.fits.source.is_some() {
        "<code>pdsweep fit</code> could not fit this sweep (see \
         <a href=\"#fits\">Fitted parameters</a> for why); below is what the grid shows."
    } else {
        "No fits yet: run <code>pdsweep fit</code> to locate the \
         optimal teacher on a fitted curve, with an interval."
    };
    format!("<div class=\"answer\"><p>{text}</p>")
}

/// The optimal teacher per student from the fitted capacity-gap curves: an interior optimum
/// with its interval, an edge of the grid, or no supported optimum.
fn fitted_optima(h: &mut String, judged: &[&super::data::CapacityGapView]) -> fmt::Result {
    h.push_str("<p>Optimal teacher per student, from the fitted capacity-gap curves:</p><ul>\n");
    for g in judged {
        let support = gap_support(g);
        let text = match (&g.t_star, &g.verdict) {
            (Some(t), _) => format!(
                "teacher of <strong>{}</strong> non-embedding parameters (interval {} – {}; {support})",
                si(t.value),
                si(t.lo),
                si(t.hi)
            ),
            (None, Some(GapVerdict::Edge { at, edge, advice })) => format!(
                "<strong>{}</strong> (the best measured teacher, {}, is the {edge} of the grid, so the optimum is there or beyond it; {support})",
                esc(advice),
                si(*at)
            ),
            (None, Some(GapVerdict::Unsupported { at, reason })) => format!(
                "no supported optimum: {} (the best measured teacher is {}; {support})",
                esc(reason),
                si(*at)
            ),
            (None, None) => continue,
        };
        let text = match crate::fit::near_best_phrase(g.near_best, si) {
            Some(tied) => format!("{text}; {tied}"),
            None => text,
        };
        writeln!(h, "<li>{}: {text}</li>", esc(&g.label()))?;
    }
    h.push_str("</ul></div>\n");
    Ok(())
}

/// Before any fit: the best teacher on the grid per student, and whether it is an edge.
fn grid_optima(h: &mut String, grid: &[super::data::OptimalPoint]) -> fmt::Result {
    if grid.is_empty() {
        h.push_str("<p>No student has been distilled from two or more teachers yet.</p></div>\n");
        return Ok(());
    }
    h.push_str("<p>Best teacher on the grid so far (lowest mean student loss):</p><ul>\n");
    for p in grid {
        let edge = match (p.at_edge, p.edge.as_deref()) {
            (true, Some("smallest")) => {
                " — <strong>edge of grid: extend the grid toward smaller teachers</strong>"
            }
            (true, _) => " — <strong>edge of grid: extend the grid toward larger teachers</strong>",
            _ => "",
        };
        writeln!(
            h,
            "<li>{}: teacher of {} non-embedding parameters{edge}</li>",
            esc(&p.label),
            si(p.t_star),
        )?;
    }
    h.push_str("</ul></div>\n");
    Ok(())
}

/// `4 teachers × 2 seeds` — what a capacity-gap answer rests on.
fn gap_support(g: &super::data::CapacityGapView) -> String {
    let seeds = g.seeds();
    if seeds > 1 {
        format!("{} teachers × {seeds} seeds", g.teachers())
    } else {
        format!("{} teachers, one seed", g.teachers())
    }
}

/// What the reader must know before trusting the headline: `fit`'s warnings, fits it could
/// not make, the noise between seeds, and answers at the edge of the grid.
fn caveats(h: &mut String, data: &ReportData) -> fmt::Result {
    let f = &data.fits;
    let mut items: Vec<String> = Vec::new();
    let mut laws: Vec<(String, &LawView)> = Vec::new();
    if let Some(l) = &f.supervised.law {
        laws.push((format!("supervised law ({})", l.law), l));
    }
    for (config, l) in &f.distill {
        laws.push((format!("distillation law ({config})"), l));
    }
    for (name, l) in &laws {
        for w in &l.warnings {
            items.push(format!("{}: {}", esc(name), rich(w)));
        }
    }
    for w in &f.optimal_teacher.warnings {
        items.push(format!("T*(S): {}", rich(w)));
    }
    let edges = f
        .capacity_gap
        .iter()
        .filter(|g| matches!(g.verdict, Some(GapVerdict::Edge { .. })))
        .count();
    if edges > 0 {
        items.push(format!(
            "{edges} of {} capacity-gap curve(s) have their best teacher at the edge of the grid: their optimum is not located",
            f.capacity_gap.len()
        ));
    }
    let spreads: Vec<f64> = f
        .capacity_gap
        .iter()
        .filter(|g| g.baseline_losses.len() > 1)
        .map(|g| {
            let lo = g
                .baseline_losses
                .iter()
                .copied()
                .fold(f64::INFINITY, f64::min);
            let hi = g
                .baseline_losses
                .iter()
                .copied()
                .fold(f64::NEG_INFINITY, f64::max);
            hi - lo
        })
        .collect();
    if let Some(max) = spreads.iter().copied().reduce(f64::max) {
        items.push(format!(
            "noise floor: replicate baselines (other seeds, same size and budget) differ by up to {max:.4} nats; differences between students smaller than that are not resolved"
        ));
    } else if !f.capacity_gap.is_empty() && f.capacity_gap.iter().all(|g| g.seeds() <= 1) {
        items.push(
            "one seed per run: the noise between runs is not measured, so no difference between students is known to be real"
                .to_string(),
        );
    }
    for (what, why) in &f.skipped {
        items.push(format!("not fitted: {}: {}", esc(what), rich(why)));
    }
    let plateau = super::data::near_unigram(data);
    if let Some((_, line)) = plateau.first() {
        let names: Vec<String> = plateau
            .iter()
            .map(|(r, _)| format!("<code>{}</code>", esc(&r.name)))
            .collect();
        items.push(format!(
            "{} run(s) ended near the unigram entropy (held-out loss above {line:.3} nats, less than a quarter of the way from the unigram entropy to the floor): {}; their losses measure when they left the plateau, not what they can learn — give them more steps",
            plateau.len(),
            names.join(", ")
        ));
    }
    if items.is_empty() {
        return Ok(());
    }
    h.push_str("<div class=\"caveats\"><strong>Before you rely on this</strong><ul>\n");
    for i in items {
        writeln!(h, "<li>{i}</li>")?;
    }
    h.push_str("</ul></div>\n");
    Ok(())
}

fn law_table(h: &mut String, law: &LawView) -> fmt::Result {
    if let Some(support) = &law.support {
        writeln!(
            h,
            "<p>Fitted to {}{}.</p>",
            esc(support),
            if law.thin {
                " — <strong class=\"warn\">under-determined</strong>: fewer than two distinct points per parameter"
            } else {
                ""
            }
        )?;
    }
    h.push_str("<table><tr><th class=\"l\">parameter</th><th>value</th><th>interval</th></tr>\n");
    // The law's own order (E, A, α, B, β, γ, then the distillation law's c0, c1, f1, d1).
    const ORDER: [&str; 10] = [
        "E", "A", "alpha", "B", "beta", "gamma", "c0", "c1", "f1", "d1",
    ];
    let mut names: Vec<&String> = law.params.keys().collect();
    names.sort_by_key(|k| ORDER.iter().position(|o| o == k).unwrap_or(ORDER.len()));
    for k in names {
        let v = &law.params[k];
        let ci = if law.unidentified.contains(k) {
            "<td class=\"ni\">not identified</td>".to_string()
        } else {
            format!(
                "<td>{}</td>",
                law.ci.get(k).map_or("–".to_string(), |(a, b)| {
                    format!("[{}, {}]", sig(*a), sig(*b))
                })
            )
        };
        let shown = match k.as_str() {
            "alpha" => "α",
            "beta" => "β",
            "gamma" => "γ",
            other => other,
        };
        writeln!(
            h,
            "<tr><td class=\"l\">{}</td><td>{}</td>{ci}</tr>",
            esc(shown),
            sig(*v)
        )?;
    }
    h.push_str("</table>\n");
    if !law.warnings.is_empty() {
        h.push_str("<ul class=\"warn\">\n");
        for w in &law.warnings {
            writeln!(h, "<li>{}</li>", rich(w))?;
        }
        h.push_str("</ul>\n");
    }
    Ok(())
}

fn trend_row(h: &mut String, name: &str, t: &TrendView) -> fmt::Result {
    let cis: Vec<String> =
        t.ci.iter()
            .map(|(k, (a, b))| format!("{k} ∈ [{}, {}]", sig(*a), sig(*b)))
            .collect();
    writeln!(
        h,
        "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td></tr>",
        esc(name),
        esc(&t.formula()),
        esc(&cis.join(", ")),
        opt(t.r2, |r| format!("{r:.3}"))
    )?;
    Ok(())
}

/// The fitted parameters section: notes, the supervised and distillation laws, released
/// teachers, the optimal teacher per student, T*(S), and what was not fitted.
fn fits(h: &mut String, data: &ReportData) -> fmt::Result {
    h.push_str("<h2 id=\"fits\">Fitted parameters</h2>\n");
    let f = &data.fits;
    if !f.any_fit() {
        h.push_str("<p>No fits yet: run <code>pdsweep fit</code>.</p>\n");
    }
    for n in &f.notes {
        writeln!(h, "<p>{}</p>", rich(n))?;
    }
    if let Some(src) = &f.source {
        writeln!(h, "<p>From {}.</p>", rich(src))?;
    }
    laws(h, f)?;
    released(h, data)?;
    optimum_table(h, data)?;
    tstar_fits(h, &f.optimal_teacher)?;
    if !f.skipped.is_empty() {
        h.push_str("<h3>Not fitted</h3><ul>\n");
        for (what, why) in &f.skipped {
            writeln!(h, "<li>{}: {}</li>", esc(what), rich(why))?;
        }
        h.push_str("</ul>\n");
    }
    Ok(())
}

/// The supervised law (with its leave-largest-out error) and each distillation law.
fn laws(h: &mut String, f: &super::data::FitViews) -> fmt::Result {
    if let Some(law) = &f.supervised.law {
        writeln!(
            h,
            "<h3>Supervised law ({}), fitted to {} runs</h3>",
            esc(&law.law),
            f.supervised.points.len()
        )?;
        law_table(h, law)?;
        if let Some(e) = law.extrapolation_error {
            writeln!(
                h,
                "<p>Leave-largest-out extrapolation error: {:.2}%.</p>",
                100.0 * e
            )?;
        }
    }
    for (config, law) in &f.distill {
        writeln!(
            h,
            "<h3>Distillation law (Busbridge et al. 2025, Eq. 8), {}</h3>\
             <p>L_S = L_T + L_T^−c0 · (1 + (L_T/(L̃_S·d1))^(1/f1))^(−c1·f1) · (A/N_S^α + B/D_S^β)^γ</p>",
            esc(config)
        )?;
        law_table(h, law)?;
    }
    Ok(())
}

/// The table of the optimal teacher per student (and budget, and config when they differ).
fn optimum_table(h: &mut String, data: &ReportData) -> fmt::Result {
    let judged: Vec<_> = data
        .fits
        .capacity_gap
        .iter()
        .filter(|g| g.t_star.is_some() || g.verdict.is_some())
        .collect();
    if judged.is_empty() {
        return Ok(());
    }
    // The config column only when configs differ; otherwise the settings are named once.
    let configs = judged.iter().any(|g| !g.config.is_empty());
    h.push_str("<h3>Optimal teacher per student</h3>\n");
    if !configs && let Some(settings) = &data.distill_settings {
        writeln!(h, "<p>Every student: {}.</p>", esc(settings))?;
    }
    writeln!(
        h,
        "<table><tr><th class=\"l\">student</th><th>tokens</th>{}<th>teachers × seeds</th>\
         <th>T*</th><th>interval</th><th class=\"l\">verdict</th></tr>",
        if configs {
            "<th class=\"l\">config</th>"
        } else {
            ""
        }
    )?;
    for g in judged {
        let (t, interval, verdict) = match (&g.t_star, &g.verdict) {
            (Some(t), _) => (
                si(t.value),
                format!("[{}, {}]", si(t.lo), si(t.hi)),
                "interior optimum".to_string(),
            ),
            (None, Some(GapVerdict::Edge { at, advice, .. })) => (
                format!("best measured {}", si(*at)),
                "–".into(),
                esc(advice),
            ),
            (None, Some(GapVerdict::Unsupported { at, reason })) => (
                format!("best measured {}", si(*at)),
                "–".into(),
                format!("no supported optimum: {}", esc(reason)),
            ),
            (None, None) => continue,
        };
        writeln!(
            h,
            "<tr><td class=\"l\">{}</td><td>{}</td>{}<td>{} × {}</td><td>{t}</td><td>{interval}</td><td class=\"l\">{verdict}</td></tr>",
            esc(&g.student),
            si(g.budget),
            if configs {
                format!("<td class=\"l\">{}</td>", esc(&g.config))
            } else {
                String::new()
            },
            g.teachers(),
            g.seeds(),
        )?;
    }
    h.push_str("</table>\n");
    Ok(())
}

/// The T*(S) fits (linear and power law), which fits better, and their warnings.
fn tstar_fits(h: &mut String, ot: &super::data::OptimalTeacherView) -> fmt::Result {
    if ot.linear.is_none() && ot.power.is_none() {
        return Ok(());
    }
    h.push_str(
        "<h3>T*(S)</h3><table><tr><th class=\"l\">form</th><th class=\"l\">fit</th>\
         <th class=\"l\">intervals</th><th>R²</th></tr>\n",
    );
    if let Some(t) = &ot.linear {
        trend_row(h, "linear", t)?;
    }
    if let Some(t) = &ot.power {
        trend_row(h, "power law", t)?;
    }
    h.push_str("</table>\n");
    if let Some(b) = &ot.better {
        writeln!(
            h,
            "<p>Better fit: {} (lower rms log residual), over {} student sizes.</p>",
            esc(b),
            ot.fitted_points.len()
        )?;
    }
    if !ot.warnings.is_empty() {
        h.push_str("<ul class=\"warn\">\n");
        for w in &ot.warnings {
            writeln!(h, "<li>{}</li>", rich(w))?;
        }
        h.push_str("</ul>\n");
    }
    Ok(())
}

/// Each pre-trained teacher's students against the distillation law fitted to the trained
/// teachers' students, and against the best trained teacher of the same student.
fn released(h: &mut String, data: &ReportData) -> fmt::Result {
    let name = |id: &str| {
        data.runs
            .iter()
            .find(|r| r.id.as_str() == id)
            .map_or(id.to_string(), |r| r.name.clone())
    };
    for c in &data.fits.released {
        writeln!(
            h,
            "<h3>Pre-trained teacher {} against the trained teachers' law ({})</h3>\n\
             <p>Its held-out loss L_T = {}. The distillation law was fitted to the {} students of \
             trained teachers only (L_T {} to {}) and predicts this teacher's students; the \
             interval is the law's 95 % bootstrap interval.{}</p>\n\
             <table><tr><th class=\"l\">student</th><th>tokens</th><th>seeds</th>\
             <th>measured</th><th>gain</th><th>predicted</th><th>interval</th><th>error</th>\
             <th class=\"l\">best trained teacher</th><th>its L_T</th><th>its student</th><th>its gain</th></tr>",
            esc(&name(&c.teacher)),
            esc(&c.config),
            loss(c.teacher_loss),
            c.law_points,
            loss(c.trained_teacher_losses[0]),
            loss(c.trained_teacher_losses[1]),
            c.not_predicted
                .as_deref()
                .map_or(String::new(), |why| format!(
                    " No prediction: {}.",
                    rich(why.lines().next().unwrap_or(""))
                ))
        )?;
        for s in &c.students {
            let measured = match s.measured_sd {
                Some(sd) => format!("{} ± {sd:.4}", loss(s.measured)),
                None => loss(s.measured),
            };
            let gain = |g: Option<f64>| opt(g, |g| format!("{g:+.4}"));
            let best = s.best_trained.as_ref();
            writeln!(
                h,
                "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{measured}</td><td>{}</td>\
                 <td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                si(s.student_params),
                si(s.student_tokens),
                s.seeds,
                gain(s.gain),
                opt(s.predicted, loss),
                s.predicted_ci.map_or("–".to_string(), |[a, b]| format!(
                    "[{}, {}]",
                    loss(a),
                    loss(b)
                )),
                opt(s.predicted, |p| format!(
                    "{:+.2} %",
                    100.0 * (p / s.measured - 1.0)
                )),
                best.map_or("–".to_string(), |b| esc(&name(&b.teacher))),
                opt(best.map(|b| b.teacher_loss), loss),
                opt(best.map(|b| b.student_loss), loss),
                gain(best.and_then(|b| b.gain)),
            )?;
        }
        h.push_str("</table>\n");
    }
    Ok(())
}

/// The corpus as the runs recorded it: files, documents, tokens, duplicates and how the held-out
/// split was chosen.
///
/// The learning rate each student size and budget was tuned to (`[train] tune_lr`) and each teacher
/// size and budget (`[teachers] tune_lr`): every candidate peak's mean held-out loss over its
/// finished runs, the chosen one in bold, diverged ones named. Nothing for a sweep that did not
/// tune. Students' distillation degrees per setting, and aligned samples of a teacher, a student
/// and its baseline continuing the same held-out prefix (nothing before `pdsweep fit` measured).
fn degrees(h: &mut String, data: &ReportData) -> fmt::Result {
    let sim = &data.similarity;
    if sim.groups.is_empty() {
        return Ok(());
    }
    h.push_str("<h2 id=\"degree\">Distillation degree</h2>\n<p>How much closer to its teacher each student is than its same-seed baseline: teacher-forced top-1 agreement and Jensen–Shannon divergence on held-out text (token), chrF1 of continuations of the same held-out prefixes under the same seeds (sequence), and how much nearer the teacher's self-similarity across seeds the student's is (homogenisation). Positive: closer to the teacher. Mean over seeds with a 95 % bootstrap interval.</p>\n<table><tr><th>student</th><th>seeds</th><th>agreement</th><th>JSD</th><th>chrF</th><th>homogenisation</th></tr>\n");
    for g in &sim.groups {
        let s = &g.summary;
        writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&g.group),
            s.seeds,
            esc(&s.agreement.render()),
            esc(&s.jsd.render()),
            esc(&s.chrf.render()),
            esc(&s.homogenisation.render()),
        )?;
    }
    h.push_str("</table>\n");
    let name = |id: &crate::plan::RunId| {
        data.runs
            .iter()
            .find(|r| &r.id == id)
            .map(|r| (r.name.clone(), r.kind))
    };
    let mut shown = 0;
    for rec in &sim.records {
        if shown >= 3 {
            break;
        }
        let Some((student, crate::plan::RunKind::Student)) = name(&rec.run_id) else {
            continue;
        };
        let Some(view) = data.runs.iter().find(|r| r.id == rec.run_id) else {
            continue;
        };
        let Some(teacher) = sim
            .records
            .iter()
            .find(|r| r.run_id == rec.reference_id && r.reference_id == rec.reference_id)
        else {
            continue;
        };
        let baseline = data
            .runs
            .iter()
            .filter(|r| {
                r.kind == crate::plan::RunKind::Baseline && r.seed == view.seed && r.n == view.n
            })
            .find_map(|b| {
                sim.records
                    .iter()
                    .find(|r| r.run_id == b.id && r.reference_id == rec.reference_id)
                    .map(|r| (b.name.clone(), r))
            });
        let (Some(sample), Some(t)) = (rec.samples.first(), teacher.samples.first()) else {
            continue;
        };
        if shown == 0 {
            h.push_str("<h3>Samples</h3>\n<p>The first continuation (seed 1, τ = 1) of a held-out prefix by a teacher, one of its students and the student's same-seed baseline.</p>\n");
        }
        shown += 1;
        let teacher_name = name(&rec.reference_id).map(|n| n.0).unwrap_or_default();
        writeln!(
            h,
            "<table class=\"samples\"><tr><th>prefix</th><td><pre>{}</pre></td></tr>\n<tr><th>{}</th><td><pre>{}</pre></td></tr>\n<tr><th>{}</th><td><pre>{}</pre></td></tr>",
            esc(&sample.prefix),
            esc(&teacher_name),
            esc(&t.text),
            esc(&student),
            esc(&sample.text),
        )?;
        if let Some((b, r)) = baseline
            && let Some(bs) = r.samples.first()
        {
            writeln!(
                h,
                "<tr><th>{}</th><td><pre>{}</pre></td></tr>",
                esc(&b),
                esc(&bs.text)
            )?;
        }
        h.push_str("</table>\n");
    }
    Ok(())
}

fn learning_rates(h: &mut String, data: &ReportData) -> fmt::Result {
    let baselines: Vec<&RunView> = data
        .runs
        .iter()
        .filter(|b| b.kind == RunKind::Baseline)
        .collect();
    let teachers: Vec<&RunView> = data.teacher_candidates.iter().collect();
    let rows = (
        lr_rows(&baselines, "student")?,
        lr_rows(&teachers, "teacher")?,
    );
    if rows.0.is_empty() && rows.1.is_empty() {
        return Ok(());
    }
    h.push_str("<h2 id=\"lr\">Learning rate per size</h2>\n<p>Peak learning rates tried per size, each with the mean held-out loss of its runs over the seeds; the chosen rate is in bold. A student size's candidates are its baselines (<code>[train] tune_lr</code>): its students train at the chosen rate, and their gains are measured against the baseline at it. A teacher's candidates are full training runs at each peak (<code>[teachers] tune_lr</code>): the teacher adopts the best (its checkpoint), and its students learn from it.</p>\n<table><tr><th>run</th><th>N</th><th>tokens</th><th>candidates</th></tr>\n");
    h.push_str(&rows.0);
    h.push_str(&rows.1);
    h.push_str("</table>\n");
    Ok(())
}

/// The learning-rate table's rows for the candidate runs `runs` (baselines or teacher
/// candidates, labelled `what`), one per size and budget that tried several peaks.
fn lr_rows(runs: &[&RunView], what: &str) -> Result<String, fmt::Error> {
    let mut groups: std::collections::BTreeMap<(u64, u64), Vec<&RunView>> =
        std::collections::BTreeMap::new();
    for b in runs.iter().filter(|b| b.lr_peak.is_some()) {
        groups
            .entry((b.n.to_bits(), b.tokens.to_bits()))
            .or_default()
            .push(b);
    }
    let mut rows = String::new();
    for ((n, d), runs) in &groups {
        let finished: Vec<(f64, f64)> = runs
            .iter()
            .filter(|b| b.done())
            .filter_map(|b| Some((b.lr_peak?, b.val_loss?)))
            .collect();
        let mut peaks: Vec<f64> = runs.iter().filter_map(|b| b.lr_peak).collect();
        peaks.sort_by(f64::total_cmp);
        peaks.dedup();
        if peaks.len() < 2 {
            continue;
        }
        let scores = crate::run::tuning::scores(&finished);
        let best = crate::run::tuning::best_peak(&finished);
        let cells: Vec<String> = peaks
            .iter()
            .map(|p| {
                let cell = match scores.iter().find(|s| s.peak == *p) {
                    Some(s) if s.finished > 0 => {
                        format!("{p:e}: {:.4} ({} run(s))", s.mean_loss, s.finished)
                    }
                    _ if runs
                        .iter()
                        .any(|b| b.lr_peak == Some(*p) && b.state == RunState::Failed) =>
                    {
                        format!("{p:e}: diverged")
                    }
                    _ => format!("{p:e}: not finished"),
                };
                if Some(*p) == best {
                    format!("<strong>{cell}</strong>")
                } else {
                    cell
                }
            })
            .collect();
        writeln!(
            rows,
            "<tr><td>{what}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            si(f64::from_bits(*n)),
            si(f64::from_bits(*d)),
            cells.join("; ")
        )?;
    }
    Ok(rows)
}

fn corpus(h: &mut String, data: &ReportData) -> fmt::Result {
    h.push_str("<h2 id=\"corpus\">Corpus</h2>\n");
    if data.corpus.is_empty() {
        h.push_str("<p>No finished run has recorded its corpus yet.</p>\n");
        return Ok(());
    }
    for c in &data.corpus {
        writeln!(h, "<h3>{}</h3>\n<dl>", esc(&c.description))?;
        let mut row = |k: &str, v: String| write!(h, "<dt>{}</dt><dd>{v}</dd>", esc(k));
        if c.files > 0 {
            row("files", format!("{}", c.files))?;
        }
        if c.documents > 0 {
            row("documents", format!("{}", c.documents))?;
        }
        if c.train_bytes > 0 {
            row(
                "training text",
                format!("{} bytes", si(c.train_bytes as f64)),
            )?;
        }
        row("training tokens", si(c.train_tokens as f64))?;
        row("held-out tokens", si(c.val_tokens as f64))?;
        if !c.val_split.is_empty() {
            row("held-out split", esc(&c.val_split))?;
        }
        if c.val_bytes_per_token > 0.0 {
            row(
                "bytes per held-out token",
                format!("{:.3}", c.val_bytes_per_token),
            )?;
        }
        if c.unigram_entropy_nats > 0.0 {
            row(
                "unigram entropy",
                format!(
                    "{:.4} nats/token (a model that ignores context)",
                    c.unigram_entropy_nats
                ),
            )?;
        }
        if let Some(e) = c.entropy_rate_nats {
            row(
                "entropy rate",
                format!("{e:.4} nats/token (no model can beat it)"),
            )?;
        }
        let synthetic = c.key.starts_with("synthetic");
        row(
            "duplicates",
            if synthetic {
                "none (a generated corpus)".to_string()
            } else if c.duplicate_groups.is_empty() {
                if c.files > 0 {
                    "no byte-identical files".to_string()
                } else {
                    "not checked (recorded before duplicate detection)".to_string()
                }
            } else {
                format!(
                    "<span class=\"warn\">{} group(s) of byte-identical files:</span> {}",
                    c.duplicate_groups.len(),
                    c.duplicate_groups
                        .iter()
                        .map(|g| g
                            .iter()
                            .map(|p| format!("<code>{}</code>", esc(p)))
                            .collect::<Vec<_>>()
                            .join(" = "))
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            },
        )?;
        row("cache key", format!("<code>{}</code>", esc(&c.key)))?;
        h.push_str("</dl>\n");
    }
    let passes: Vec<(&str, f64)> = data
        .runs
        .iter()
        .filter(|r| r.kind == RunKind::Teacher)
        .filter_map(|r| Some((r.name.as_str(), r.epochs()?)))
        .filter(|(_, e)| *e > 1.0)
        .collect();
    if !passes.is_empty() {
        writeln!(
            h,
            "<p class=\"warn\">{} teacher(s) make more than one pass over the training data \
             (up to {:.1} epochs): a teacher that has seen the text several times may have memorised it.</p>",
            passes.len(),
            passes.iter().map(|p| p.1).fold(0.0, f64::max)
        )?;
    }
    Ok(())
}

fn runs(h: &mut String, data: &ReportData) -> fmt::Result {
    h.push_str("<h2 id=\"runs\">Runs and results</h2>\n");
    if data.runs.is_empty() {
        h.push_str("<p>The plan has no runs.</p>\n");
        return Ok(());
    }
    h.push_str(
        "<p>Losses are held-out cross-entropy in nats/token; gain is the matching baseline's loss \
         minus the student's; N is non-embedding parameters.</p>\n<div class=\"scroll\"><table>\n\
         <tr><th class=\"l\">run</th><th class=\"l\">kind</th><th class=\"l\">state</th>\
         <th>seed</th><th>params</th><th>N</th><th>tokens</th><th>epochs</th>\
         <th class=\"l\">teacher</th>\
         <th>val loss</th><th>bits/byte</th><th>tokens/s</th><th>wall (s)</th>\
         <th>agreement</th><th>KL(T‖S)</th><th>gain</th></tr>\n",
    );
    for r in &data.runs {
        writeln!(
            h,
            "<tr class=\"{}\"><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            r.state.as_str(),
            esc(&r.name),
            r.kind,
            r.state.as_str(),
            r.seed,
            si(r.params_total as f64),
            si(r.n),
            si(r.tokens),
            opt(r.epochs(), |e| format!("{e:.2}")),
            r.teacher.as_ref().map_or(String::new(), |t| esc(&t.name)),
            opt(r.val_loss, loss),
            opt(r.val_bpb.filter(|_| r.done()), |v| format!("{v:.3}")),
            opt(r.tokens_per_s.filter(|_| r.done()), |v| format!("{v:.0}")),
            opt(r.wall_s.filter(|_| r.done()), |v| format!("{v:.1}")),
            opt(r.agreement, |v| format!("{:.1}%", 100.0 * v)),
            opt(r.kl_teacher_student, |v| format!("{v:.4}")),
            opt(r.gain, |v| format!("{v:+.4}")),
        )?;
    }
    h.push_str("</table></div>\n");
    let failed: Vec<_> = data
        .runs
        .iter()
        .filter(|r| r.state == RunState::Failed)
        .collect();
    if !failed.is_empty() {
        h.push_str("<h3>Failed runs</h3>\n");
        for r in failed {
            writeln!(
                h,
                "<p><code>{}</code> ({}):</p><pre>{}</pre>",
                esc(&r.name),
                r.kind,
                esc(r.error.as_deref().unwrap_or("no reason recorded"))
            )?;
        }
    }
    let logits = data
        .runs
        .iter()
        .filter(|r| r.kind == RunKind::Logits)
        .count();
    if logits > 0 {
        writeln!(
            h,
            "<p>{logits} logit pass(es) score the students' tokens with a finished teacher; their \
             loss is the teacher's on held-out text.</p>"
        )?;
    }
    Ok(())
}

fn provenance(h: &mut String, data: &ReportData) -> fmt::Result {
    let p = &data.provenance;
    write!(
        h,
        "<h2 id=\"provenance\">Provenance</h2>\n<dl>\
         <dt>sweep file</dt><dd><code>{}</code></dd>\
         <dt>sweep file SHA-256</dt><dd><code>{}</code></dd>\
         <dt>pdsweep</dt><dd>{} (planned with {} at {})</dd>\
         <dt>git commit</dt><dd><code>{}</code></dd>\
         <dt>date</dt><dd>{}</dd>\
         <dt>fits</dt><dd>{}</dd></dl>\n",
        esc(&data.sweep.path),
        esc(&p.sweep_sha256),
        esc(&p.pdsweep_version),
        esc(&p.planned_with),
        esc(&p.planned_at),
        esc(p.git_commit.as_deref().unwrap_or("none")),
        esc(&p.date_utc),
        data.fits
            .source
            .as_deref()
            .map_or("none yet".to_string(), rich),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_and_backticks_become_code() {
        assert_eq!(esc("<a & 'b'>"), "&lt;a &amp; &#39;b&#39;&gt;");
        assert_eq!(
            rich("run `pdsweep fit` <now>"),
            "run <code>pdsweep fit</code> &lt;now&gt;"
        );
    }
}

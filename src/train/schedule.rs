//! Evaluating a [`Schedule`] (learning rate or distillation weight α) at a step of a run.

use crate::spec::{Schedule, ScheduleKind};

/// The value of `schedule` at `step` (0-based) of a run of `steps` steps.
///
/// Fractions of the run are measured at the start of the step: warm-up rises linearly from
/// 0 to the peak over the first `warmup·steps` steps; `constant` then stays at the peak;
/// `cosine` and `linear_down` fall from the peak to `final·peak` over the rest; `wsd` stays at
/// the peak until the last `decay·steps` steps and then falls linearly to `final·peak`;
/// `linear_up` rises from `final·peak` to the peak over the whole run.
pub(crate) fn value_at(schedule: &Schedule, step: u64, steps: u64) -> f64 {
    let t = &schedule.0;
    let steps = steps.max(1) as f64;
    let s = step as f64;
    let end = t.peak * t.final_ratio;
    let warmup = (t.warmup * steps).round();
    if t.schedule != ScheduleKind::LinearUp && s < warmup {
        return t.peak * (s + 1.0) / warmup;
    }
    let after = (s - warmup).max(0.0);
    let remaining = (steps - warmup).max(1.0);
    match t.schedule {
        ScheduleKind::Constant => t.peak,
        ScheduleKind::LinearUp => end + (t.peak - end) * (s + 1.0) / steps,
        ScheduleKind::LinearDown => t.peak + (end - t.peak) * after / remaining,
        ScheduleKind::Cosine => {
            let progress = (after / remaining).min(1.0);
            end + (t.peak - end) * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos())
        }
        ScheduleKind::Wsd => {
            let decay_steps = (t.decay * steps).round();
            let decay_start = steps - decay_steps;
            if s < decay_start || decay_steps == 0.0 {
                t.peak
            } else {
                t.peak + (end - t.peak) * (s - decay_start + 1.0) / decay_steps
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::ScheduleTable;

    fn table(kind: ScheduleKind, warmup: f64, decay: f64, final_ratio: f64) -> Schedule {
        Schedule(ScheduleTable {
            schedule: kind,
            peak: 1.0,
            warmup,
            decay,
            final_ratio,
        })
    }

    #[test]
    fn wsd_warms_up_holds_and_decays() {
        let s = table(ScheduleKind::Wsd, 0.1, 0.2, 0.0);
        assert!((value_at(&s, 0, 100) - 0.1).abs() < 1e-12);
        assert_eq!(value_at(&s, 9, 100), 1.0);
        assert_eq!(value_at(&s, 50, 100), 1.0);
        assert_eq!(value_at(&s, 79, 100), 1.0);
        assert!((value_at(&s, 80, 100) - 0.95).abs() < 1e-12);
        assert!(value_at(&s, 99, 100).abs() < 1e-12);
    }

    #[test]
    fn cosine_ends_at_final() {
        let s = table(ScheduleKind::Cosine, 0.0, 0.0, 0.1);
        assert_eq!(value_at(&s, 0, 101), 1.0);
        assert!((value_at(&s, 101, 101) - 0.1).abs() < 1e-9);
        assert!((value_at(&s, 50, 101) - 0.55).abs() < 0.02);
    }

    #[test]
    fn constant_and_linear() {
        assert_eq!(value_at(&Schedule::constant(0.9), 5, 10), 0.9);
        let up = table(ScheduleKind::LinearUp, 0.0, 0.0, 0.0);
        assert!((value_at(&up, 9, 10) - 1.0).abs() < 1e-12);
        assert!((value_at(&up, 4, 10) - 0.5).abs() < 1e-12);
        let down = table(ScheduleKind::LinearDown, 0.0, 0.0, 0.0);
        assert_eq!(value_at(&down, 0, 10), 1.0);
        assert!((value_at(&down, 5, 10) - 0.5).abs() < 1e-12);
    }
}

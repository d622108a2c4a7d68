//! Distillation across tokenizers: a student window's positions aligned with its teacher's by
//! bytes ([`super::align`]), the teacher windows that hold them, and a student batch's targets
//! as the cross-tokenizer loss reads them (`crate::kernels::CrossDistillation`).
//!
//! Both training streams live in the corpus's byte coordinate (`crate::data::bytes`), so a
//! student window's tokens and the teacher tokens over the same bytes are two lists of token
//! ends. Between two consecutive ends they share lies one **unit**: the student rows that
//! predict its tokens (the first, the *base* row, carries the loss; the later ones enter through
//! GOLD's span merge) and the teacher positions that predict its teacher tokens (the base
//! position's kept distribution, times the teacher's probabilities of the later tokens it
//! actually has: `TokenAfter::log_prob`). A unit whose two sides do not cover the same number of
//! bytes (a gap between documents on one side only) is dropped, as are rows in no unit; both
//! are counted.
//!
//! The teacher's merged values at τ: t_e = exp((ln p_b(e) + Σ ln p_l(next)) / τ) / Z, where
//! each position's Z_τ = Σ over its kept entries and its tail of exp(ln p / τ) (1 at τ = 1,
//! where the values are the teacher's own probabilities under its full vocabulary).

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;

use burn::tensor::{Device, Int, Tensor, TensorData};

use super::align::units;
use super::truncate::{Kept, Truncation, refine};
use crate::data::{Batch, ByteIndex};
use crate::kernels::CrossDistillation;
use crate::spec::CrossTokenizer;

/// The byte indices of a student's and its teacher's training streams, and their windows.
#[derive(Debug, Clone)]
pub struct Aligner {
    /// The student's training stream.
    pub student: ByteIndex,
    /// The teacher's training stream.
    pub teacher: ByteIndex,
    /// Positions per student window.
    pub student_context: usize,
    /// Positions per teacher window.
    pub teacher_context: usize,
}

/// One unit of a student window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowUnit {
    /// The base row (its position in the window): it predicts the unit's first student token.
    pub row: usize,
    /// Student rows of the unit (the base and the later ones after it).
    pub rows: usize,
    /// The teacher position predicting the unit's first teacher token.
    pub teacher: u64,
    /// Teacher positions after it that predict the unit's other teacher tokens.
    pub teacher_later: usize,
    /// Where the unit starts in the corpus's bytes.
    pub from: u64,
}

/// A student window's units and what they leave out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WindowAlignment {
    /// The units, in order.
    pub units: Vec<WindowUnit>,
    /// Rows in no unit.
    pub unaligned_rows: usize,
}

impl WindowAlignment {
    /// The teacher positions the units read (empty without units).
    pub fn teacher_positions(&self) -> Range<u64> {
        match (self.units.first(), self.units.last()) {
            (Some(a), Some(b)) => a.teacher..b.teacher + b.teacher_later as u64 + 1,
            _ => 0..0,
        }
    }
}

impl Aligner {
    /// Teacher positions that lie in a window (the trailing partial window has none).
    fn teacher_positions_stored(&self) -> u64 {
        let c = self.teacher_context.max(1);
        (self.teacher.len().saturating_sub(1) / c * c) as u64
    }

    /// The units of student window `w` (window `w` starts at token `w · context`).
    pub fn window(&self, w: u64) -> WindowAlignment {
        let c = self.student_context;
        let a = w as usize * c;
        let (s_ends, s_lens) = self.student.ends(a, a + c + 1);
        let rows = s_ends.len().saturating_sub(1);
        let (Some(&lo), Some(&hi)) = (s_ends.first(), s_ends.last()) else {
            return WindowAlignment {
                units: Vec::new(),
                unaligned_rows: rows,
            };
        };
        let first = self.teacher.first_ending_at_or_after(lo);
        let after = self.teacher.first_ending_at_or_after(hi.saturating_add(1));
        let (t_ends, t_lens) = self.teacher.ends(first, after);
        let (found, _) = units(&s_ends, &t_ends);
        let stored = self.teacher_positions_stored();
        let mut out = Vec::with_capacity(found.len());
        for u in found {
            let bytes = |lens: &[u32], r: &Range<usize>| -> u64 {
                lens[r.clone()].iter().map(|&l| u64::from(l)).sum()
            };
            let teacher = (first + u.teacher.start - 1) as u64;
            let later = u.teacher.len() - 1;
            if bytes(&s_lens, &u.student) != bytes(&t_lens, &u.teacher)
                || teacher + later as u64 >= stored
            {
                continue;
            }
            out.push(WindowUnit {
                row: u.student.start - 1,
                rows: u.student.len(),
                teacher,
                teacher_later: later,
                from: u.bytes.start as u64,
            });
        }
        let covered: usize = out.iter().map(|u| u.rows).sum();
        WindowAlignment {
            units: out,
            unaligned_rows: rows - covered,
        }
    }

    /// The teacher windows holding the positions of student windows `windows`.
    pub fn teacher_windows(&self, windows: impl IntoIterator<Item = u64>) -> BTreeSet<u64> {
        let c = self.teacher_context.max(1) as u64;
        let mut out = BTreeSet::new();
        for w in windows {
            let p = self.window(w).teacher_positions();
            if !p.is_empty() {
                out.extend(p.start / c..=(p.end - 1) / c);
            }
        }
        out
    }
}

/// How a student of another tokenizer's teacher is scored: the loss, its own truncation and τ,
/// and (for GOLD) which teacher tokens are student tokens.
#[derive(Debug, Clone)]
pub struct CrossLoss {
    /// ULD or GOLD.
    pub kind: CrossTokenizer,
    /// The student's top-p and top-k of the teacher (k also bounds ULD's sorted vectors).
    pub truncation: Truncation,
    /// τ.
    pub tau: f64,
    /// For each teacher id, the student id with the same bytes, or −1.
    pub map: Vec<i32>,
    /// 1 for the student ids some teacher id maps to.
    pub student_matched: Vec<f32>,
    /// GOLD's weights of its KL and ULD parts: the share of the teacher's vocabulary with a
    /// student twin, and the rest (TRL's default).
    pub weights: (f64, f64),
}

/// Teacher ids mapped to the student id of the same bytes (special and empty tokens never
/// match; the first student id of a byte string wins).
pub(crate) fn vocabulary_map(student: &[Vec<u8>], teacher: &[Vec<u8>]) -> (Vec<i32>, Vec<f32>) {
    let mut by_bytes: HashMap<&[u8], i32> = HashMap::new();
    for (id, b) in student.iter().enumerate() {
        if !b.is_empty() {
            by_bytes.entry(b.as_slice()).or_insert(id as i32);
        }
    }
    let map: Vec<i32> = teacher
        .iter()
        .map(|b| by_bytes.get(b.as_slice()).copied().unwrap_or(-1))
        .collect();
    let mut matched = vec![0.0f32; student.len()];
    for &s in map.iter().filter(|&&s| s >= 0) {
        matched[s as usize] = 1.0;
    }
    (map, matched)
}

impl CrossLoss {
    /// The loss `kind` at `truncation` and `tau` between vocabularies of these token bytes.
    pub fn new(
        kind: CrossTokenizer,
        truncation: Truncation,
        tau: f64,
        student_bytes: &[Vec<u8>],
        teacher_bytes: &[Vec<u8>],
    ) -> CrossLoss {
        let (map, student_matched) = match kind {
            CrossTokenizer::Gold => vocabulary_map(student_bytes, teacher_bytes),
            CrossTokenizer::Uld => (Vec::new(), vec![0.0; student_bytes.len()]),
        };
        let twins = map.iter().filter(|&&s| s >= 0).count() as f64;
        let share = twins / teacher_bytes.len().max(1) as f64;
        CrossLoss {
            kind,
            truncation,
            tau,
            map,
            student_matched,
            weights: (share, 1.0 - share),
        }
    }

    /// Entries compared per unit (ULD's k, and the most teacher entries kept): the student's
    /// top-k, at most 256.
    pub fn top_k(&self, teacher_vocab: u64) -> usize {
        (self.truncation.top_k.kept(teacher_vocab) as usize).clamp(1, 256)
    }
}

/// A student batch's cross-tokenizer targets on the host (see [`CrossDistillation`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CrossTargets {
    /// Per row: the unit's rows at a base row, 0 at a later row, −1 outside any unit.
    pub span: Vec<i64>,
    /// `[rows, width]`: ln t of each teacher entry at base rows (0 elsewhere).
    pub log_t: Vec<f32>,
    /// `[rows, width]`: the student twin of each entry, or −1.
    pub matched: Vec<i64>,
    /// `[rows, width]`: 1 for an entry, 0 for padding.
    pub mask: Vec<f32>,
    /// Entries per row.
    pub width: usize,
    /// Units in the batch.
    pub units: usize,
    /// Rows in no unit.
    pub unaligned_rows: usize,
}

/// ln Σ exp(v/τ) over a position's kept values and its tail.
fn log_z(k: &Kept, tau: f64) -> f64 {
    let tail = f64::from(k.tail_log_mass());
    let values = k.log_probs.iter().map(|&v| f64::from(v)).chain([tail]);
    let scaled: Vec<f64> = values.map(|v| v / tau).collect();
    let max = scaled.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    max + scaled.iter().map(|v| (v - max).exp()).sum::<f64>().ln()
}

impl CrossLoss {
    /// The targets of `batch` (student windows of `aligner.student_context`), the teacher's
    /// position `j` read by `teacher(j)`; `Err` names a position the teacher lacks or whose
    /// bytes disagree with the alignment (a store of another corpus).
    pub fn targets(
        &self,
        aligner: &Aligner,
        batch: &Batch,
        teacher: &dyn Fn(u64) -> Option<Kept>,
        teacher_vocab: u64,
    ) -> Result<CrossTargets, String> {
        let c = batch.context;
        let rows = batch.batch * c;
        let width = self.top_k(teacher_vocab);
        let mut out = CrossTargets {
            span: vec![-1; rows],
            log_t: vec![0.0; rows * width],
            matched: vec![-1; rows * width],
            mask: vec![0.0; rows * width],
            width,
            units: 0,
            unaligned_rows: 0,
        };
        let missing = |j: u64| format!("the teacher has no logits for its position {j}");
        for (b, &w) in batch.windows.iter().enumerate() {
            let alignment = aligner.window(w);
            out.unaligned_rows += alignment.unaligned_rows;
            for u in alignment.units {
                let base = teacher(u.teacher).ok_or_else(|| missing(u.teacher))?;
                if let Some(next) = base.next
                    && next.from != u.from
                {
                    return Err(format!(
                        "the teacher's position {} ends its context at byte {}, the student's unit starts at byte {}: the teacher's logits are not of this corpus",
                        u.teacher, next.from, u.from
                    ));
                }
                let (mut later, mut later_z) = (0.0f64, 0.0f64);
                for j in u.teacher + 1..=u.teacher + u.teacher_later as u64 {
                    let k = teacher(j).ok_or_else(|| missing(j))?;
                    let next = k.next.ok_or_else(|| {
                        format!("the teacher's position {j} does not say which token follows it")
                    })?;
                    later += f64::from(next.log_prob);
                    if self.tau != 1.0 {
                        later_z += log_z(&k, self.tau);
                    }
                }
                let z = if self.tau == 1.0 {
                    0.0
                } else {
                    log_z(&base, self.tau) + later_z
                };
                let kept = refine(&base, self.truncation.top_p.0, self.truncation.top_k)
                    .min(width)
                    .min(base.ids.len());
                let row = b * c + u.row;
                out.span[row] = u.rows as i64;
                for r in row + 1..row + u.rows {
                    out.span[r] = 0;
                }
                for e in 0..kept {
                    let at = row * width + e;
                    let lp = f64::from(base.log_probs[e]) + later;
                    out.log_t[at] = (lp / self.tau - z) as f32;
                    out.mask[at] = 1.0;
                    out.matched[at] = self
                        .map
                        .get(base.ids[e] as usize)
                        .map_or(-1, |&s| i64::from(s));
                }
                out.units += 1;
            }
        }
        Ok(out)
    }

    /// `targets` as the fused head's cross-tokenizer term on `device`.
    pub fn tensors(&self, targets: &CrossTargets, device: &Device) -> CrossDistillation {
        let rows = targets.span.len();
        let w = targets.width;
        CrossDistillation {
            span: Tensor::<1, Int>::from_data(
                TensorData::new(targets.span.clone(), [rows]),
                device,
            ),
            log_t: Tensor::from_data(TensorData::new(targets.log_t.clone(), [rows, w]), device),
            matched: Tensor::<2, Int>::from_data(
                TensorData::new(targets.matched.clone(), [rows, w]),
                device,
            ),
            mask: Tensor::from_data(TensorData::new(targets.mask.clone(), [rows, w]), device),
            student_matched: Tensor::from_data(
                TensorData::new(self.student_matched.clone(), [self.student_matched.len()]),
                device,
            ),
            kind: self.kind,
            tau: self.tau,
            top_k: w,
            gold_weights: self.weights,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Stream;
    use crate::data::split::Segment;

    /// Byte ids (length 1) for the student; the teacher's ids are their own lengths.
    fn aligner(student: Vec<u32>, teacher: Vec<u32>, sc: usize, tc: usize) -> Aligner {
        let seg = vec![Segment { token: 0, byte: 0 }];
        Aligner {
            student: ByteIndex::new(Stream::Memory(student), vec![1; 256], seg.clone()),
            teacher: ByteIndex::new(Stream::Memory(teacher), (0..10).collect(), seg),
            student_context: sc,
            teacher_context: tc,
        }
    }

    /// A byte student against a teacher of 2- and 3-byte tokens: every teacher boundary is
    /// shared, each unit is one teacher token and its bytes, the first row of a window has no
    /// unit when no teacher token ends where its context ends.
    #[test]
    fn a_byte_window_aligns_with_longer_teacher_tokens() {
        let student: Vec<u32> = (0..40).map(|i| 97 + (i % 26)).collect();
        // teacher tokens of lengths 2, 3, 2, 3, ... covering the same 40 bytes
        let teacher: Vec<u32> = (0..16).map(|i| if i % 2 == 0 { 2 } else { 3 }).collect();
        let a = aligner(student, teacher, 8, 4);
        // window 1: student tokens 8..=16 end at bytes 9..=17; teacher ends 2,5,7,10,12,15,17,20
        let w = a.window(1);
        let froms: Vec<u64> = w.units.iter().map(|u| u.from).collect();
        assert_eq!(froms, vec![10, 12, 15]);
        assert_eq!(
            w.units[0],
            WindowUnit {
                row: 1,
                rows: 2,
                teacher: 3,
                teacher_later: 0,
                from: 10
            }
        );
        // rows 0 (context ends at 9, no teacher end there... it is inside the unit before) and
        // the rows after byte 17 predict nothing aligned
        assert_eq!(w.unaligned_rows, 8 - 2 - 3 - 2);
        assert_eq!(a.teacher_windows([1]), BTreeSet::from([0, 1]));
    }
}

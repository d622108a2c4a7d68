//! Aligning two tokenizations of one text by bytes, for distillation across tokenizers
//! (issue 27). A tokenization is the byte offset where each of its tokens ends. Position i of
//! a sequence predicts token i + 1, which starts where token i ends; so a student position and
//! a teacher position predict "the same thing" when their tokens end at the same byte: a
//! **shared boundary**. Between two consecutive shared boundaries b < c, each side's next
//! tokens cover exactly the bytes [b, c): one **unit**. A unit with one token on each side is a
//! one-to-one pair; otherwise the side with several tokens is *merged* (GOLD: the teacher's
//! log-probability of the span is the sum of its tokens' log-probabilities, by the chain rule)
//! or the unit is skipped and counted, as the loss chooses.
//!
//! Worked example: the text `"the cat"` (7 bytes), student tokens `"the" " cat"` (ends 3, 7),
//! teacher tokens `"th" "e" " c" "at"` (ends 2, 3, 5, 7). Shared boundaries: 3 and 7 (and 0,
//! the start, which no position predicts from unless the sequence has a token before it).
//! Student position 0 (after "the") and teacher position 1 (after "e") both predict what starts
//! at byte 3; the unit [3, 7) is the student's token 1 (" cat") against the teacher's tokens 2
//! and 3 (" c" "at"), merged. The bytes before the first shared boundary that a position can
//! predict from (here [0, 3)) have no aligned pair and are counted as unaligned.
//!
//! Invariants (checked by [`Alignment::check`] and the property tests): units are disjoint,
//! contiguous and increasing; on each side they cover consecutive tokens exactly once; a unit's
//! tokens on either side cover exactly its bytes.

use std::ops::Range;

/// One aligned span of bytes and the tokens of each side that cover it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// The bytes `[b, c)`.
    pub bytes: Range<usize>,
    /// The student tokens covering them (token indices; position `t - 1` predicts token `t`).
    pub student: Range<usize>,
    /// The teacher tokens covering them.
    pub teacher: Range<usize>,
}

impl Unit {
    /// One token on each side: the two distributions can be compared directly.
    pub fn one_to_one(&self) -> bool {
        self.student.len() == 1 && self.teacher.len() == 1
    }
}

/// Why two tokenizations cannot be aligned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AlignError {
    /// Token ends that go backwards.
    #[error("the {side} tokenization's byte offsets decrease at token {at}")]
    NotMonotone {
        /// `student` or `teacher`.
        side: &'static str,
        /// The token.
        at: usize,
    },
    /// The two cover different lengths of text.
    #[error("the tokenizations cover different texts ({student} bytes against {teacher})")]
    Length {
        /// Student bytes.
        student: usize,
        /// Teacher bytes.
        teacher: usize,
    },
}

/// The units of two tokenizations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alignment {
    /// Units in byte order.
    pub units: Vec<Unit>,
    /// Bytes before the first shared boundary after a first token on both sides (no position
    /// predicts them on both sides).
    pub unaligned_bytes: usize,
    /// Total bytes of the text.
    pub total_bytes: usize,
}

/// The byte offset where each token ends, from each token's bytes.
pub fn ends_of(token_bytes: &[Vec<u8>]) -> Vec<usize> {
    let mut at = 0;
    token_bytes
        .iter()
        .map(|b| {
            at += b.len();
            at
        })
        .collect()
}

/// Aligns the student's and the teacher's tokenizations of one text, given where each token ends
/// (`ends_of`).
///
/// Tokens without bytes (BOS, EOS) end where the previous token does and are part of the unit they
/// sit in. A unit starts at a boundary that both sides reach *after at least one token* (a position
/// exists to predict from).
pub fn align(student: &[usize], teacher: &[usize]) -> Result<Alignment, AlignError> {
    monotone(student, "student")?;
    monotone(teacher, "teacher")?;
    let (ls, lt) = (
        student.last().copied().unwrap_or(0),
        teacher.last().copied().unwrap_or(0),
    );
    if ls != lt {
        return Err(AlignError::Length {
            student: ls,
            teacher: lt,
        });
    }
    let wide = |ends: &[usize]| ends.iter().map(|&e| e as u64).collect::<Vec<u64>>();
    let (units, first_shared) = units(&wide(student), &wide(teacher));
    Ok(Alignment {
        units,
        unaligned_bytes: first_shared.map_or(ls, |b| b as usize),
        total_bytes: ls,
    })
}

/// The units between the shared boundaries of two lists of token ends (ascending, any
/// common origin: they need not cover the same bytes, and what follows the last shared
/// boundary is in no unit), and the first shared boundary.
pub fn units(student: &[u64], teacher: &[u64]) -> (Vec<Unit>, Option<u64>) {
    // walk both lists of ends together; a boundary is shared when both reach it
    let (mut i, mut j) = (0usize, 0usize);
    let mut units = Vec::new();
    let mut open: Option<(u64, usize, usize)> = None; // (byte, next student token, next teacher token)
    let mut first_shared = None;
    while i < student.len() && j < teacher.len() {
        let (a, b) = (student[i], teacher[j]);
        if a == b {
            // the last token of each side ending at this byte
            while i + 1 < student.len() && student[i + 1] == a {
                i += 1;
            }
            while j + 1 < teacher.len() && teacher[j + 1] == b {
                j += 1;
            }
            match open {
                Some((start, si, tj)) => units.push((start, a, si..i + 1, tj..j + 1)),
                None => first_shared = Some(a),
            }
            open = Some((a, i + 1, j + 1));
            i += 1;
            j += 1;
        } else if a < b {
            i += 1;
        } else {
            j += 1;
        }
    }
    let units = units
        .into_iter()
        .map(|(start, end, student, teacher)| Unit {
            bytes: start as usize..end as usize,
            student,
            teacher,
        })
        .collect();
    (units, first_shared)
}

fn monotone(ends: &[usize], side: &'static str) -> Result<(), AlignError> {
    match ends.windows(2).position(|w| w[1] < w[0]) {
        Some(at) => Err(AlignError::NotMonotone { side, at: at + 1 }),
        None => Ok(()),
    }
}

impl Alignment {
    /// Share of the text's bytes inside units.
    pub fn coverage(&self) -> f64 {
        let aligned: usize = self.units.iter().map(|u| u.bytes.len()).sum();
        aligned as f64 / self.total_bytes.max(1) as f64
    }

    /// Units with one token on each side.
    pub fn one_to_one(&self) -> usize {
        self.units.iter().filter(|u| u.one_to_one()).count()
    }

    /// Checks the invariants against the tokenizations it was made from: units contiguous and
    /// increasing, consecutive tokens on each side used once, and each unit's tokens covering
    /// exactly its bytes.
    ///
    /// `Err` names the first violation.
    pub fn check(&self, student: &[usize], teacher: &[usize]) -> Result<(), String> {
        let start_of = |ends: &[usize], t: usize| if t == 0 { 0 } else { ends[t - 1] };
        for (k, u) in self.units.iter().enumerate() {
            if u.bytes.is_empty() || u.student.is_empty() || u.teacher.is_empty() {
                return Err(format!("unit {k} is empty: {u:?}"));
            }
            if let Some(prev) = k.checked_sub(1).map(|p| &self.units[p])
                && (prev.bytes.end != u.bytes.start
                    || prev.student.end != u.student.start
                    || prev.teacher.end != u.teacher.start)
            {
                return Err(format!(
                    "unit {k} does not follow unit {}: {prev:?} {u:?}",
                    k - 1
                ));
            }
            for (side, ends, r) in [
                ("student", student, &u.student),
                ("teacher", teacher, &u.teacher),
            ] {
                let covered = start_of(ends, r.start)..ends[r.end - 1];
                // zero-byte tokens at the start of a range sit at the unit's first byte
                if covered.end != u.bytes.end || covered.start != u.bytes.start {
                    return Err(format!(
                        "unit {k}: {side} tokens {r:?} cover {covered:?}, not {:?}",
                        u.bytes
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worked_example() {
        let student = ends_of(&[b"the".to_vec(), b" cat".to_vec()]);
        let teacher = ends_of(&[
            b"th".to_vec(),
            b"e".to_vec(),
            b" c".to_vec(),
            b"at".to_vec(),
        ]);
        let a = align(&student, &teacher).unwrap();
        assert_eq!(
            a.units,
            vec![Unit {
                bytes: 3..7,
                student: 1..2,
                teacher: 2..4
            }]
        );
        assert_eq!(a.unaligned_bytes, 3);
        a.check(&student, &teacher).unwrap();
        assert!((a.coverage() - 4.0 / 7.0).abs() < 1e-12);
    }

    #[test]
    fn identical_tokenizations_align_one_to_one() {
        let ends = vec![1, 3, 4, 8];
        let a = align(&ends, &ends).unwrap();
        assert_eq!(a.units.len(), 3);
        assert_eq!(a.one_to_one(), 3);
        a.check(&ends, &ends).unwrap();
    }

    #[test]
    fn zero_byte_tokens_join_their_unit_and_bad_input_is_refused() {
        // a BOS (0 bytes) before the student's text
        let student = vec![0, 2, 4];
        let teacher = vec![2, 4];
        let a = align(&student, &teacher).unwrap();
        assert_eq!(
            a.units,
            vec![Unit {
                bytes: 2..4,
                student: 2..3,
                teacher: 1..2
            }]
        );
        a.check(&student, &teacher).unwrap();
        assert!(matches!(
            align(&[2, 1], &[1, 2]),
            Err(AlignError::NotMonotone { .. })
        ));
        assert!(matches!(align(&[3], &[4]), Err(AlignError::Length { .. })));
    }
}

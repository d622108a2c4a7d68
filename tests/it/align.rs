//! Byte-offset alignment across tokenizers (issue 27), property-tested with real tokenizers:
//! bytes, and two byte-level BPE tokenizers of different sizes trained with the `tokenizers`
//! crate on text mixing ASCII, accented Latin, CJK, emoji and whitespace runs. On random
//! Unicode text (multi-byte characters, whitespace runs, tokens that split a character) every
//! pair of tokenizations aligns exactly: each token's bytes concatenate to the text, units are
//! contiguous and disjoint, every token after the first shared boundary is in exactly one unit,
//! and each unit's tokens cover exactly its bytes on both sides.

use std::sync::OnceLock;

use pdsweep::data::Tokenizer;
use pdsweep::distill::align::{align, ends_of};
use proptest::prelude::*;

/// Training text: a few languages and symbols, so merges cross and split characters.
const TRAINING: &str = "The quick brown fox — café, naïve, crème brûlée; 日本語のテキスト、\
    中文文本。 Ünïcödé  tabs\tand\n\nnewlines 🙂🚀 ½ € £ ¥ — “quotes” «guillemets» αβγ δε \
    Привет мир. ";

fn tokenizers() -> &'static [Tokenizer; 3] {
    static T: OnceLock<[Tokenizer; 3]> = OnceLock::new();
    T.get_or_init(|| {
        let text = TRAINING.repeat(40);
        let bpe = |v| Tokenizer::train_bpe(std::iter::once(text.as_str()), v).expect("train");
        [Tokenizer::Byte, bpe(300), bpe(420)]
    })
}

fn tokenization(t: &Tokenizer, text: &str) -> Vec<usize> {
    let mut ids = Vec::new();
    t.encode_plain(text, &mut ids).expect("encode");
    let bytes = t.token_bytes(&ids).expect("token bytes");
    assert_eq!(
        bytes.concat(),
        text.as_bytes(),
        "{t:?}: token bytes are the text"
    );
    ends_of(&bytes)
}

/// Random text from pieces that stress boundaries.
fn text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        "[a-zA-Z]{1,8}",
        "[ \t\n]{1,5}",
        "[éèüïçñß]{1,3}",
        "[日本語中文テキスト]{1,4}",
        "[🙂🚀½€]{1,2}",
        "\\PC{1,6}",
    ];
    prop::collection::vec(piece, 1..20).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_pair_of_tokenizations_aligns_exactly(text in text()) {
        let ts = tokenizers();
        let ends: Vec<Vec<usize>> = ts.iter().map(|t| tokenization(t, &text)).collect();
        for s in 0..ts.len() {
            for t in 0..ts.len() {
                let a = align(&ends[s], &ends[t]).expect("align");
                if let Err(e) = a.check(&ends[s], &ends[t]) {
                    panic!("{e} (student {s}, teacher {t}, text {text:?})");
                }
                // every byte after the first shared boundary is in exactly one unit
                let aligned: usize = a.units.iter().map(|u| u.bytes.len()).sum();
                prop_assert_eq!(aligned + a.unaligned_bytes, text.len());
                // and every token after it is used once per side
                if let (Some(first), Some(last)) = (a.units.first(), a.units.last()) {
                    prop_assert_eq!(last.student.end, ends[s].len());
                    prop_assert_eq!(last.teacher.end, ends[t].len());
                    let used: usize = a.units.iter().map(|u| u.student.len()).sum();
                    prop_assert_eq!(used, ends[s].len() - first.student.start);
                }
                if s == t {
                    prop_assert_eq!(a.one_to_one(), a.units.len());
                }
            }
        }
    }
}

/// Against the byte tokenizer every BPE boundary is shared, so every BPE token after the
/// first is a unit of its own (one teacher token, one or more byte tokens).
#[test]
fn bytes_against_bpe_share_every_bpe_boundary() {
    let ts = tokenizers();
    let text = "naïve café — 日本語 🙂  end";
    let bytes = tokenization(&ts[0], text);
    let bpe = tokenization(&ts[2], text);
    let a = align(&bytes, &bpe).expect("align");
    assert_eq!(a.units.len(), bpe.len() - 1);
    assert!(a.units.iter().all(|u| u.teacher.len() == 1));
    assert_eq!(a.unaligned_bytes, bpe[0]);
}

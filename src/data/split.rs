//! The held-out split of a real-text corpus: exact duplicates dropped, then whole documents held
//! out, so no held-out text is also training text.
//!
//! Documents are compared by the SHA-256 of their text; of each group of identical documents the
//! first (in path order) is kept and the others are dropped and named. Without a separate
//! validation set, documents are held out in the order of their content hash (a fixed,
//! file-order-independent sample): every document that still fits in the remaining held-out
//! budget is held out whole; if the budget is not filled that way, the tail of one more
//! document makes up the rest and its head stays in training (the only document the two splits
//! share, and they share no text). With a validation set, it is the held-out split and training
//! documents identical to one of its documents are dropped. As a check, the fraction of
//! held-out 64-token windows that also occur somewhere in training is measured: near-duplicates
//! and boilerplate show up there.

use std::collections::{HashMap, HashSet};

/// Tokens of a window compared between the splits.
pub(crate) const OVERLAP_WINDOW: usize = 64;

/// Where a document's tokens lie in the scratch stream of preparation: `len` tokens from
/// `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    /// First token.
    pub start: u64,
    /// Number of tokens.
    pub len: u64,
}

impl Span {
    /// The first `n` tokens and the rest.
    fn cut(self, n: u64) -> (Span, Span) {
        let n = n.min(self.len);
        (
            Span {
                start: self.start,
                len: n,
            },
            Span {
                start: self.start + n,
                len: self.len - n,
            },
        )
    }
}

/// One tokenised document: what the split needs to know of it. Its tokens stay in the
/// scratch stream; the split only says which of them go where.
#[derive(Debug, Clone)]
pub struct TokenizedDoc {
    /// Where it came from (`file` or `file:line`).
    pub source: String,
    /// SHA-256 of its text.
    pub hash: [u8; 32],
    /// Its tokens, followed by the document separator.
    pub tokens: Span,
    /// Bytes of its text and separator: its extent in the corpus's byte coordinate.
    pub bytes: u64,
}

/// A piece of a split's token stream: a span of the scratch stream, or tokens made for the
/// split itself (the two halves of a document cut by bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Tokens of the scratch stream.
    Span(Span),
    /// Tokens of their own.
    Owned(Vec<u32>),
}

impl Piece {
    /// Number of tokens.
    pub fn len(&self) -> u64 {
        match self {
            Piece::Span(s) => s.len,
            Piece::Owned(t) => t.len() as u64,
        }
    }

    /// Whether the piece holds no token.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The piece's tokens, read from `scratch` where they lie there.
    #[cfg(test)]
    pub fn tokens<'a>(&'a self, scratch: &'a [u32]) -> &'a [u32] {
        match self {
            Piece::Span(s) => &scratch[s.start as usize..(s.start + s.len) as usize],
            Piece::Owned(t) => t,
        }
    }
}

/// A token stream as pieces, with its length.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pieces {
    /// The pieces in order.
    pub pieces: Vec<Piece>,
    len: u64,
}

impl Pieces {
    /// Appends a piece (empty ones are dropped).
    pub fn push(&mut self, piece: Piece) {
        if !piece.is_empty() {
            self.len += piece.len();
            self.pieces.push(piece);
        }
    }

    /// Number of tokens.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the stream is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Keeps the first `n` tokens.
    pub fn truncate(&mut self, n: u64) {
        let mut kept = Pieces::default();
        for piece in std::mem::take(&mut self.pieces) {
            let room = n - kept.len;
            if room == 0 {
                break;
            }
            kept.push(match piece {
                Piece::Span(s) => Piece::Span(s.cut(room).0),
                Piece::Owned(mut t) => {
                    t.truncate(room as usize);
                    Piece::Owned(t)
                }
            });
        }
        *self = kept;
    }

    /// The tokens, piece by piece, read from `scratch` (preparation reads them from its scratch
    /// file instead, `scan::Scratch::visit`).
    #[cfg(test)]
    pub fn slices<'a>(&'a self, scratch: &'a [u32]) -> impl Iterator<Item = &'a [u32]> + 'a {
        self.pieces.iter().map(move |p| p.tokens(scratch))
    }
}

/// Where a piece of one document starts in a token stream and in the corpus's bytes.
///
/// The byte coordinate is the same for every tokenizer: the kept documents (duplicates dropped)
/// laid end to end in their order, each as its text and separator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Segment {
    /// The piece's first token in the stream.
    pub token: u64,
    /// Where the piece starts in the byte coordinate.
    pub byte: u64,
}

/// The document whose tail is held out: its hash and the bytes of its head (training text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Boundary {
    /// SHA-256 of its text.
    pub hash: [u8; 32],
    /// Tokens of its head (the training part).
    pub head_tokens: usize,
    /// Its piece among the training segments.
    pub segment: usize,
}

/// The training and held-out token streams and how they were chosen.
#[derive(Debug, Clone, Default)]
pub struct Split {
    /// Training tokens (documents in their original order).
    pub train: Pieces,
    /// Held-out tokens.
    pub val: Pieces,
    /// Documents read (before dropping duplicates).
    pub documents: u64,
    /// Groups of identical documents, each listed by source; the first of each was kept.
    pub duplicate_groups: Vec<Vec<String>>,
    /// How the held-out split was chosen, in words.
    pub description: String,
    /// The documents held out whole (their hashes), so another tokenizer can hold out the same.
    pub held: Vec<[u8; 32]>,
    /// The document cut between the splits, if one is.
    pub boundary: Option<Boundary>,
    /// Where each document piece of `train` starts, in order.
    pub train_segments: Vec<Segment>,
}

/// Drops exact duplicates (keeping the first of each group) and returns the groups.
fn dedup(docs: Vec<TokenizedDoc>) -> (Vec<TokenizedDoc>, Vec<Vec<String>>) {
    let mut first: HashMap<[u8; 32], usize> = HashMap::new();
    let mut groups: Vec<Vec<String>> = Vec::new();
    let mut group_of: HashMap<[u8; 32], usize> = HashMap::new();
    let mut kept = Vec::with_capacity(docs.len());
    for doc in docs {
        if let Some(&i) = first.get(&doc.hash) {
            let g = *group_of.entry(doc.hash).or_insert_with(|| {
                groups.push(vec![kept_source(&kept, i)]);
                groups.len() - 1
            });
            groups[g].push(doc.source);
        } else {
            first.insert(doc.hash, kept.len());
            kept.push(doc);
        }
    }
    (kept, groups)
}

fn kept_source(kept: &[TokenizedDoc], i: usize) -> String {
    kept[i].source.clone()
}

/// Splits `docs`, holding out `val_tokens` tokens of whole documents where possible.
pub(crate) fn hold_out(docs: Vec<TokenizedDoc>, val_tokens: u64) -> Split {
    let documents = docs.len() as u64;
    let (docs, duplicate_groups) = dedup(docs);
    let mut order: Vec<usize> = (0..docs.len()).collect();
    order.sort_by_key(|&i| docs[i].hash);
    let mut held = vec![false; docs.len()];
    let mut need = val_tokens;
    let mut whole = Vec::new();
    for &i in &order {
        if need == 0 {
            break;
        }
        if docs[i].tokens.len <= need && docs.len() - whole.len() > 1 {
            held[i] = true;
            need -= docs[i].tokens.len;
            whole.push(i);
        }
    }
    let boundary = (need > 0)
        .then(|| order.iter().copied().find(|&i| !held[i]))
        .flatten();
    let mut val = Pieces::default();
    for &i in &whole {
        val.push(Piece::Span(docs[i].tokens));
    }
    let mut train = Pieces::default();
    let mut train_segments = Vec::new();
    let mut cut_at = None;
    for ((i, doc), byte) in docs.iter().enumerate().zip(starts(&docs)) {
        if held[i] {
            continue;
        }
        train_segments.push(Segment {
            token: train.len(),
            byte,
        });
        if Some(i) == boundary {
            let cut = doc.tokens.len.saturating_sub(need);
            let (head, tail) = doc.tokens.cut(cut);
            train.push(Piece::Span(head));
            val.push(Piece::Span(tail));
            cut_at = Some(Boundary {
                hash: doc.hash,
                head_tokens: cut as usize,
                segment: train_segments.len() - 1,
            });
        } else {
            train.push(Piece::Span(doc.tokens));
        }
    }
    let description = describe(&docs, &whole, boundary, need, docs.len());
    Split {
        train,
        val,
        documents,
        duplicate_groups,
        description,
        held: whole.iter().map(|&i| docs[i].hash).collect(),
        boundary: cut_at,
        train_segments,
    }
}

/// Where each document starts in the byte coordinate (documents end to end).
fn starts(docs: &[TokenizedDoc]) -> impl Iterator<Item = u64> + '_ {
    docs.iter().scan(0u64, |at, d| {
        let start = *at;
        *at += d.bytes;
        Some(start)
    })
}

/// The split another tokenizer made (`held` whole documents, and the `boundary` document whose head
/// of `head_bytes` bytes stays in training), applied to documents tokenised here, so both
/// tokenizers hold out the same text and train on the same bytes.
///
/// `cut` tokenises the boundary document's head and tail (without and with the separator) here.
/// Documents are deduplicated first, as the other split did.
pub fn follow(
    docs: Vec<TokenizedDoc>,
    held: &HashSet<[u8; 32]>,
    boundary: Option<([u8; 32], u64)>,
    mut cut: impl FnMut(&TokenizedDoc, u64) -> (Vec<u32>, Vec<u32>),
    description: String,
) -> Split {
    let documents = docs.len() as u64;
    let (docs, duplicate_groups) = dedup(docs);
    let (mut train, mut val, mut train_segments) =
        (Pieces::default(), Pieces::default(), Vec::new());
    let mut cut_at = None;
    for (doc, byte) in docs.iter().zip(starts(&docs)) {
        if held.contains(&doc.hash) {
            val.push(Piece::Span(doc.tokens));
            continue;
        }
        train_segments.push(Segment {
            token: train.len(),
            byte,
        });
        match boundary {
            Some((hash, head_bytes)) if hash == doc.hash => {
                let (head, tail) = cut(doc, head_bytes);
                cut_at = Some(Boundary {
                    hash,
                    head_tokens: head.len(),
                    segment: train_segments.len() - 1,
                });
                train.push(Piece::Owned(head));
                val.push(Piece::Owned(tail));
            }
            _ => train.push(Piece::Span(doc.tokens)),
        }
    }
    Split {
        train,
        val,
        documents,
        duplicate_groups,
        description,
        held: held.iter().copied().collect(),
        boundary: cut_at,
        train_segments,
    }
}

/// Uses `val_docs` as the held-out split (up to `val_tokens` tokens); training documents
/// identical to a held-out one are dropped (and listed as duplicates).
pub(crate) fn separate(
    docs: Vec<TokenizedDoc>,
    val_docs: Vec<TokenizedDoc>,
    val_tokens: u64,
) -> Split {
    let documents = docs.len() as u64;
    let (val_docs, mut duplicate_groups) = dedup(val_docs);
    let (docs, groups) = dedup(docs);
    duplicate_groups.extend(groups);
    let val_sources: HashMap<[u8; 32], &str> = val_docs
        .iter()
        .map(|d| (d.hash, d.source.as_str()))
        .collect();
    let mut train = Pieces::default();
    let mut train_segments = Vec::new();
    let mut dropped = 0;
    for (doc, byte) in docs.iter().zip(starts(&docs)) {
        match val_sources.get(&doc.hash) {
            Some(v) => {
                duplicate_groups.push(vec![v.to_string(), doc.source.clone()]);
                dropped += 1;
            }
            None => {
                train_segments.push(Segment {
                    token: train.len(),
                    byte,
                });
                train.push(Piece::Span(doc.tokens));
            }
        }
    }
    let mut val = Pieces::default();
    for d in &val_docs {
        val.push(Piece::Span(d.tokens));
    }
    let available = val.len();
    val.truncate(val_tokens);
    let mut description = format!(
        "held out: the validation set ({} documents, {} of its {} tokens)",
        val_docs.len(),
        val.len(),
        available
    );
    if dropped > 0 {
        description +=
            &format!("; {dropped} training documents identical to held-out ones dropped");
    }
    Split {
        train,
        val,
        documents,
        duplicate_groups,
        description,
        held: Vec::new(),
        boundary: None,
        train_segments,
    }
}

fn describe(
    docs: &[TokenizedDoc],
    whole: &[usize],
    boundary: Option<usize>,
    tail: u64,
    kept: usize,
) -> String {
    let names = |ids: &[usize]| -> String {
        let shown: Vec<String> = ids
            .iter()
            .take(3)
            .map(|&i| format!("`{}`", short(&docs[i].source)))
            .collect();
        let more = ids.len().saturating_sub(3);
        if more > 0 {
            format!("{} and {more} more", shown.join(", "))
        } else {
            shown.join(", ")
        }
    };
    let mut parts = Vec::new();
    if !whole.is_empty() {
        parts.push(format!(
            "{} whole document{} ({})",
            whole.len(),
            if whole.len() == 1 { "" } else { "s" },
            names(whole)
        ));
    }
    if let Some(b) = boundary {
        parts.push(format!(
            "the last {tail} tokens of `{}` (its beginning is training text)",
            short(&docs[b].source)
        ));
    }
    let how = if kept == 1 {
        "the corpus is one document, so the held-out text is its end"
    } else {
        "chosen by content hash, never duplicated in training"
    };
    format!("held out: {}; {how}", parts.join(" and "))
}

/// The file name of a source (`path/to/file.txt:12` → `file.txt:12`).
fn short(source: &str) -> &str {
    source.rsplit('/').next().unwrap_or(source)
}

/// Fraction of the held-out windows of `OVERLAP_WINDOW` tokens (every position) that occur
/// anywhere in `train` (a stream of token slices, windows running across them).
pub fn overlap<'a>(train: impl Iterator<Item = &'a [u32]>, val: &[u32]) -> f64 {
    let mut overlap = Overlap::new(val);
    for slice in train {
        overlap.feed(slice);
    }
    overlap.fraction()
}

/// The overlap of a held-out split with a training stream fed a part at a time: memory is the
/// held-out windows', whatever the size of the training stream.
pub(crate) struct Overlap {
    val: Vec<u64>,
    wanted: HashSet<u64>,
    found: HashSet<u64>,
    windows: Windows,
}

impl Overlap {
    /// Ready to measure `val`'s windows.
    pub fn new(val: &[u32]) -> Overlap {
        let val: Vec<u64> = Windows::default().hashes(val.iter().copied()).collect();
        Overlap {
            wanted: val.iter().copied().collect(),
            val,
            found: HashSet::new(),
            windows: Windows::default(),
        }
    }

    /// The next part of the training stream.
    pub fn feed(&mut self, train: &[u32]) {
        let wanted = &self.wanted;
        self.found.extend(
            self.windows
                .hashes(train.iter().copied())
                .filter(|h| wanted.contains(h)),
        );
    }

    /// The fraction of held-out windows seen in training (0 for a held-out split shorter than a
    /// window).
    pub fn fraction(&self) -> f64 {
        if self.val.is_empty() {
            return 0.0;
        }
        let hits = self.val.iter().filter(|h| self.found.contains(h)).count();
        hits as f64 / self.val.len() as f64
    }
}

/// Polynomial rolling hashes (mod 2^64) of every window of [`OVERLAP_WINDOW`] tokens of a
/// stream fed in parts: the last window's tokens are kept between parts.
#[derive(Default)]
struct Windows {
    last: std::collections::VecDeque<u32>,
    hash: u64,
}

impl Windows {
    const BASE: u64 = 0x9E37_79B9_7F4A_7C15 | 1;

    /// The hash of every window that ends in `tokens`.
    fn hashes<'s>(
        &'s mut self,
        tokens: impl Iterator<Item = u32> + 's,
    ) -> impl Iterator<Item = u64> + 's {
        let w = OVERLAP_WINDOW;
        let top = (0..w - 1).fold(1u64, |p, _| p.wrapping_mul(Self::BASE));
        tokens.filter_map(move |t| {
            if self.last.len() == w {
                let out = self.last.pop_front().map_or(0, |o| o as u64 + 1);
                self.hash = self.hash.wrapping_sub(out.wrapping_mul(top));
            }
            self.hash = self
                .hash
                .wrapping_mul(Self::BASE)
                .wrapping_add(t as u64 + 1);
            self.last.push_back(t);
            (self.last.len() == w).then_some(self.hash)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    /// Documents of byte tokens laid end to end in a scratch stream, as preparation lays them.
    #[derive(Default)]
    struct Scratch(Vec<u32>);

    impl Scratch {
        fn doc(&mut self, name: &str, text: &str) -> TokenizedDoc {
            let start = self.0.len() as u64;
            self.0.extend(text.bytes().map(u32::from));
            TokenizedDoc {
                source: name.into(),
                hash: Sha256::digest(text.as_bytes()).into(),
                tokens: Span {
                    start,
                    len: text.len() as u64,
                },
                bytes: text.len() as u64,
            }
        }

        fn tokens(&self, pieces: &Pieces) -> Vec<u32> {
            pieces.slices(&self.0).flatten().copied().collect()
        }

        fn overlap(&self, split: &Split) -> f64 {
            overlap(split.train.slices(&self.0), &self.tokens(&split.val))
        }
    }

    fn text(seed: u32, len: usize) -> String {
        let mut x = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                char::from(b'a' + (x % 26) as u8)
            })
            .collect()
    }

    #[test]
    fn identical_documents_are_dropped_and_named() {
        let a = text(1, 500);
        let mut s = Scratch::default();
        let docs = vec![
            s.doc("a.txt", &a),
            s.doc("b.txt", &text(2, 500)),
            s.doc("copy/a.txt", &a),
            s.doc("c.txt", &text(3, 500)),
        ];
        let split = hold_out(docs, 200);
        assert_eq!(split.documents, 4);
        assert_eq!(split.duplicate_groups, vec![vec!["a.txt", "copy/a.txt"]]);
        assert_eq!(split.train.len() + split.val.len(), 1500);
        assert_eq!(split.val.len(), 200);
    }

    #[test]
    fn whole_documents_are_held_out_when_they_fit() {
        let mut s = Scratch::default();
        let docs: Vec<_> = (0..10)
            .map(|i| s.doc(&format!("{i}.txt"), &text(i, 100)))
            .collect();
        let split = hold_out(docs, 300);
        assert_eq!(split.val.len(), 300);
        assert!(
            split.description.contains("3 whole documents"),
            "{}",
            split.description
        );
        assert!(!split.description.contains("last"), "{}", split.description);
        assert_eq!(s.overlap(&split), 0.0);
    }

    #[test]
    fn one_document_is_split_at_its_end() {
        let t = text(7, 1000);
        let mut s = Scratch::default();
        let split = hold_out(vec![s.doc("only.txt", &t)], 100);
        assert_eq!(
            s.tokens(&split.val),
            t.bytes().skip(900).map(u32::from).collect::<Vec<_>>()
        );
        assert_eq!(split.train.len(), 900);
        assert!(
            split.description.contains("one document"),
            "{}",
            split.description
        );
    }

    #[test]
    fn held_out_text_never_appears_in_training_even_with_a_duplicated_file() {
        let mut s = Scratch::default();
        let docs: Vec<_> = (0..6)
            .flat_map(|i| {
                let t = text(i, 400);
                let mut v = vec![s.doc(&format!("{i}.txt"), &t)];
                if i == 2 {
                    v.push(s.doc("dup/2.txt", &t));
                }
                v
            })
            .collect();
        for val in [100, 400, 700, 1000] {
            let split = hold_out(docs.clone(), val);
            assert_eq!(s.overlap(&split), 0.0, "val {val}");
            assert_eq!(split.val.len(), val);
        }
    }

    #[test]
    fn overlap_counts_shared_windows_also_across_pieces() {
        let shared = text(9, 200);
        let train: Vec<u32> = format!("{}{}", text(1, 300), shared)
            .bytes()
            .map(u32::from)
            .collect();
        let val: Vec<u32> = format!("{}{}", shared, text(2, 200))
            .bytes()
            .map(u32::from)
            .collect();
        // 200 − 64 + 1 shared windows out of 400 − 64 + 1, whether training comes whole or in
        // pieces that cut the shared text.
        for parts in [
            vec![train.as_slice()],
            vec![&train[..350], &train[350..420], &train[420..]],
        ] {
            let o = overlap(parts.into_iter(), &val);
            assert!((o - 137.0 / 337.0).abs() < 1e-9, "{o}");
        }
    }

    #[test]
    fn pieces_truncate_across_spans_and_owned_tokens() {
        let mut p = Pieces::default();
        p.push(Piece::Span(Span { start: 10, len: 5 }));
        p.push(Piece::Owned(vec![1, 2, 3]));
        p.push(Piece::Span(Span { start: 0, len: 0 }));
        assert_eq!((p.len(), p.pieces.len()), (8, 2));
        p.truncate(6);
        assert_eq!(p.len(), 6);
        assert_eq!(p.pieces[1], Piece::Owned(vec![1]));
    }

    #[test]
    fn a_separate_validation_set_drops_identical_training_documents() {
        let v = text(5, 300);
        let mut s = Scratch::default();
        let docs = vec![s.doc("a.txt", &text(1, 300)), s.doc("v-copy.txt", &v)];
        let split = separate(docs, vec![s.doc("val/v.txt", &v)], 1000);
        assert_eq!(split.val.len(), 300);
        assert_eq!(split.train.len(), 300);
        assert_eq!(
            split.duplicate_groups,
            vec![vec!["val/v.txt", "v-copy.txt"]]
        );
        assert!(
            split.description.contains("dropped"),
            "{}",
            split.description
        );
    }
}

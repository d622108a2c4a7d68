//! Turning a token stream into training batches in a fixed, seed-determined order.
//!
//! The stream is cut into windows of `context + 1` tokens starting every `context` tokens
//! (inputs are the first `context`, targets the last `context`). Global window number
//! `g = step · batch + row` is taken from epoch `g / windows`, in an order that is a
//! permutation of the windows drawn from `(seed, epoch)` (or the stream order for a generated
//! stream that is never repeated): a Fisher–Yates table up to [`TABLE_WINDOWS`] windows, a keyed
//! Feistel bijection computed window by window above it, so a billion-token corpus starts its
//! first step without building a table. The batch of a step is therefore a pure function of the
//! seed and the step: a resumed run sees exactly the data it would have seen, and every run of
//! the same seed reads the same stream, so a shorter run reads a prefix of a longer one. A batch
//! becomes the model's input and target tensors through [`batch_tensors`]. A batch names the
//! windows of its rows ([`Batch::windows`]): a logit store is keyed by window, not by step, so
//! one store serves every seed (each reads the store's windows in its own order).

use burn::tensor::{Device, Int, Tensor, TensorData};

use super::stream::Stream;

/// Produces the batches of a run.
#[derive(Debug)]
pub(crate) struct Batcher<'a> {
    stream: &'a Stream,
    context: usize,
    batch: usize,
    seed: u64,
    windows: usize,
    shuffle: bool,
    /// The order of the epoch last used.
    cached: std::cell::RefCell<Option<(u64, Order)>>,
}

/// One batch as flat row-major token ids.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    /// `[batch, context]` input ids.
    pub inputs: Vec<i64>,
    /// `[batch, context]` next-token ids.
    pub targets: Vec<i64>,
    /// Rows.
    pub batch: usize,
    /// Columns.
    pub context: usize,
    /// The window number (its start divided by `context`) of each row, in row order.
    pub windows: Vec<u64>,
}

impl Batch {
    /// The batch as consecutive micro-batches of at most `rows` rows (gradient accumulation),
    /// in row order; the last may be shorter.
    pub fn micro_batches(&self, rows: usize) -> Vec<Batch> {
        let rows = rows.max(1);
        (0..self.batch)
            .step_by(rows)
            .map(|first| {
                let end = (first + rows).min(self.batch);
                let cells = first * self.context..end * self.context;
                Batch {
                    inputs: self.inputs[cells.clone()].to_vec(),
                    targets: self.targets[cells].to_vec(),
                    batch: end - first,
                    context: self.context,
                    windows: self.windows[first..end].to_vec(),
                }
            })
            .collect()
    }
}

impl<'a> Batcher<'a> {
    /// A batcher over the training stream; `shuffle` permutes windows per epoch.
    pub fn new(
        stream: &'a Stream,
        context: usize,
        batch: usize,
        seed: u64,
        shuffle: bool,
    ) -> Option<Self> {
        let windows = stream.len().saturating_sub(1) / context;
        (windows > 0).then(|| Batcher {
            stream,
            context,
            batch,
            seed,
            windows,
            shuffle,
            cached: std::cell::RefCell::new(None),
        })
    }

    /// Number of distinct windows (one epoch).
    #[cfg(test)]
    pub fn windows(&self) -> usize {
        self.windows
    }

    /// The batch of optimiser step `step`.
    pub fn batch(&self, step: u64) -> Batch {
        let windows: Vec<u64> = (0..self.batch as u64)
            .map(|row| self.window(step * self.batch as u64 + row) as u64)
            .collect();
        window_batch(self.stream, self.context, &windows)
    }

    /// The windows a run reads in its first `count` rows (global window numbers
    /// `0..count`, every epoch included), as a sorted set without repeats: what a logit store
    /// must hold for it.
    pub fn windows_read(&self, count: u64) -> std::collections::BTreeSet<u64> {
        windows_read(self.windows, self.seed, self.shuffle, count)
    }

    /// The window global window number `g` (step · batch + row) reads.
    pub fn window(&self, g: u64) -> usize {
        let epoch = g / self.windows as u64;
        let pos = (g % self.windows as u64) as usize;
        if !self.shuffle {
            return pos;
        }
        let mut cached = self.cached.borrow_mut();
        if cached.as_ref().is_none_or(|(e, _)| *e != epoch) {
            *cached = Some((epoch, Order::new(self.windows, mix(self.seed, epoch))));
        }
        cached
            .as_ref()
            .map_or(pos, |(_, o)| o.get(pos as u64) as usize)
    }
}

/// How many batches [`prefetch`] builds ahead of the step that consumes them.
pub const PREFETCH: usize = 2;

/// Runs `body` with the batches of `steps` built ahead on another thread (at most [`PREFETCH`]
/// waiting), so a step never waits for its batch to be gathered from the cache: on a GPU the step
/// is short and a batch read from a large memory-mapped cache is not.
///
/// `body` receives them in step order; it may stop early (the builder then stops too).
pub(crate) fn prefetch<R>(
    batcher: Batcher<'_>,
    steps: std::ops::Range<u64>,
    body: impl FnOnce(&mut dyn Iterator<Item = Batch>) -> R,
) -> R {
    std::thread::scope(|scope| {
        let (send, receive) = std::sync::mpsc::sync_channel(PREFETCH);
        scope.spawn(move || {
            for step in steps {
                // the consumer stopped early: nothing more to build
                if send.send(batcher.batch(step)).is_err() {
                    break;
                }
            }
        });
        body(&mut receive.into_iter())
    })
}

/// Above this many windows an epoch's order is computed window by window ([`Feistel`]) instead of
/// as a table: a table of 2^22 windows is 16 MiB and a few milliseconds, a corpus of a billion
/// tokens in windows of 64 would need 19M entries (76 MiB, half a second) before the first step.
///
/// Every corpus below it keeps the order it always had.
pub const TABLE_WINDOWS: usize = 1 << 22;

/// The order of the windows in one epoch: a permutation of `0..n` from a seed.
#[derive(Debug)]
enum Order {
    /// Fisher–Yates, as a table (corpora of at most [`TABLE_WINDOWS`] windows).
    Table(Vec<u32>),
    /// A keyed bijection, computed per window (larger corpora).
    Feistel(Feistel),
}

impl Order {
    fn new(n: usize, seed: u64) -> Order {
        if n <= TABLE_WINDOWS {
            Order::Table(permutation(n, seed))
        } else {
            Order::Feistel(Feistel::new(n as u64, seed))
        }
    }

    /// The window at position `i` of the epoch.
    fn get(&self, i: u64) -> u64 {
        match self {
            Order::Table(p) => p.get(i as usize).map_or(i, |&w| u64::from(w)),
            Order::Feistel(f) => f.get(i),
        }
    }
}

/// A permutation of `0..n` with no table: a four-round Feistel network over the smallest
/// even number of bits that covers `n`, keyed by SplitMix64 from the seed, walked until it
/// lands inside `0..n` (fewer than four steps on average, since the domain is under 4n).
#[derive(Debug, Clone, Copy)]
pub struct Feistel {
    n: u64,
    half: u32,
    keys: [u64; 4],
}

impl Feistel {
    /// The permutation of `0..n` drawn from `seed`.
    pub fn new(n: u64, seed: u64) -> Feistel {
        let bits = (64 - n.saturating_sub(1).leading_zeros()).max(2);
        Feistel {
            n,
            half: bits.div_ceil(2),
            keys: [1, 2, 3, 4].map(|r| mix(seed, r)),
        }
    }

    /// The element at position `i` (`i < n`).
    pub fn get(&self, i: u64) -> u64 {
        let mut x = i;
        loop {
            x = self.round_trip(x);
            if x < self.n {
                return x;
            }
        }
    }

    /// One pass of the network over the `2 · half`-bit domain.
    fn round_trip(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half) - 1;
        let (mut left, mut right) = (x >> self.half, x & mask);
        for key in self.keys {
            let next = left ^ (mix(key, right) & mask);
            left = right;
            right = next;
        }
        (left << self.half) | right
    }
}

/// The windows the first `count` rows of a run of `seed` read from a stream of `windows`
/// windows (see [`Batcher::windows_read`]): every window once `count` reaches an epoch, else
/// the first `count` of the first epoch's order.
pub(crate) fn windows_read(
    windows: usize,
    seed: u64,
    shuffle: bool,
    count: u64,
) -> std::collections::BTreeSet<u64> {
    if count >= windows as u64 {
        return (0..windows as u64).collect();
    }
    if !shuffle {
        return (0..count).collect();
    }
    let order = Order::new(windows, mix(seed, 0));
    (0..count).map(|i| order.get(i)).collect()
}

/// The batch whose rows are the windows `windows` of `stream` (window `w` starts at token
/// `w · context`), in that order.
pub(crate) fn window_batch(stream: &Stream, context: usize, windows: &[u64]) -> Batch {
    let mut inputs = Vec::with_capacity(windows.len() * context);
    let mut targets = Vec::with_capacity(windows.len() * context);
    for &w in windows {
        push_window(
            stream,
            w as usize * context,
            context,
            &mut inputs,
            &mut targets,
        );
    }
    Batch {
        inputs,
        targets,
        batch: windows.len(),
        context,
        windows: windows.to_vec(),
    }
}

/// Every held-out window, in order, in batches of at most `batch` rows.
pub(crate) fn eval_batches(stream: &Stream, context: usize, batch: usize) -> Vec<Batch> {
    let windows = stream.len().saturating_sub(1) / context;
    let mut out = Vec::new();
    let mut w = 0;
    while w < windows {
        let rows = batch.min(windows - w);
        let ids: Vec<u64> = (w as u64..(w + rows) as u64).collect();
        out.push(window_batch(stream, context, &ids));
        w += rows;
    }
    out
}

/// Appends the window of `context + 1` tokens at `start`: its first `context` tokens to
/// `inputs` and its last `context` to `targets`.
fn push_window(
    stream: &Stream,
    start: usize,
    context: usize,
    inputs: &mut Vec<i64>,
    targets: &mut Vec<i64>,
) {
    let tokens = stream.slice(start, start + context + 1);
    inputs.extend(tokens[..context].iter().map(|&t| t as i64));
    targets.extend(tokens[1..].iter().map(|&t| t as i64));
}

/// SplitMix64 finaliser: a well-mixed 64-bit hash of `(seed, x)`.
pub fn mix(seed: u64, x: u64) -> u64 {
    let mut z = seed ^ x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A Fisher–Yates permutation of `0..n` driven by SplitMix64 from `seed` (a fixed algorithm, so
/// data order never changes with a dependency's version).
fn permutation(n: usize, seed: u64) -> Vec<u32> {
    let mut p: Vec<u32> = (0..n as u32).collect();
    let mut state = seed;
    for i in (1..n).rev() {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let j = (mix(state, 0) % (i as u64 + 1)) as usize;
        p.swap(i, j);
    }
    p
}

/// The batch as `[batch, seq]` input and target tensors on `device`.
pub(crate) fn batch_tensors(batch: &Batch, device: &Device) -> (Tensor<2, Int>, Tensor<2, Int>) {
    let shape = [batch.batch, batch.context];
    let make =
        |v: &Vec<i64>| Tensor::<2, Int>::from_data(TensorData::new(v.clone(), shape), device);
    (make(&batch.inputs), make(&batch.targets))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table-free order is a permutation (every window once per epoch), depends on the
    /// seed, and is not close to the identity.
    #[test]
    fn feistel_orders_are_permutations() {
        for n in [1u64, 2, 3, 1000, 65_537] {
            let f = Feistel::new(n, 7);
            let mut seen: Vec<u64> = (0..n).map(|i| f.get(i)).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "n = {n}");
        }
        let (a, b) = (Feistel::new(65_537, 7), Feistel::new(65_537, 8));
        let same = (0..1000).filter(|&i| a.get(i) == b.get(i)).count();
        let fixed = (0..1000).filter(|&i| a.get(i) == i).count();
        assert!(same < 10 && fixed < 10, "{same} shared, {fixed} fixed");
        assert_eq!(
            Order::new(TABLE_WINDOWS, 3).get(5),
            u64::from(permutation(TABLE_WINDOWS, 3)[5])
        );
        assert!(matches!(
            Order::new(TABLE_WINDOWS + 1, 3),
            Order::Feistel(_)
        ));
    }

    /// Prefetched batches are the batches of those steps, in order, and stopping early ends
    /// the builder.
    #[test]
    fn prefetched_batches_are_the_steps_batches() {
        let stream = Stream::Memory((0..10_000u32).map(|i| i % 97).collect());
        let batcher = || Batcher::new(&stream, 16, 4, 3, true).unwrap();
        let direct: Vec<Batch> = (5..25).map(|s| batcher().batch(s)).collect();
        let fetched: Vec<Batch> = prefetch(batcher(), 5..25, |b| b.collect());
        assert_eq!(fetched, direct);
        let first = prefetch(batcher(), 0..1_000_000, |b| b.next());
        assert_eq!(first, Some(batcher().batch(0)));
    }

    #[test]
    fn batches_are_a_function_of_seed_and_step() {
        let stream = Stream::Memory((0..10_000u32).map(|i| i % 97).collect());
        let a = Batcher::new(&stream, 16, 4, 7, true).unwrap();
        let b = Batcher::new(&stream, 16, 4, 7, true).unwrap();
        assert_eq!(a.batch(123), b.batch(123));
        assert_eq!(a.batch(5), b.batch(5));
        let c = Batcher::new(&stream, 16, 4, 8, true).unwrap();
        assert_ne!(a.batch(5), c.batch(5));
        let batch = a.batch(0);
        assert_eq!(batch.inputs.len(), 64);
        assert_eq!(batch.inputs[1..16], batch.targets[..15]);
    }

    #[test]
    fn an_epoch_visits_every_window_once() {
        let stream = Stream::Memory((0..1601u32).collect());
        let b = Batcher::new(&stream, 16, 10, 3, true).unwrap();
        assert_eq!(b.windows(), 100);
        let mut starts: Vec<i64> = (0..10)
            .flat_map(|s| {
                b.batch(s)
                    .inputs
                    .chunks(16)
                    .map(|c| c[0])
                    .collect::<Vec<_>>()
            })
            .collect();
        starts.sort();
        assert_eq!(starts, (0..100).map(|w| w * 16).collect::<Vec<i64>>());
    }

    #[test]
    fn a_batch_names_its_windows_and_windows_read_covers_them() {
        let stream = Stream::Memory((0..1601u32).collect());
        let b = Batcher::new(&stream, 16, 10, 3, true).unwrap();
        let batch = b.batch(2);
        for (row, w) in batch.windows.iter().enumerate() {
            assert_eq!(batch.inputs[row * 16], (*w * 16) as i64);
        }
        assert_eq!(window_batch(&stream, 16, &batch.windows), batch);
        let read = b.windows_read(30);
        assert_eq!(read.len(), 30, "one epoch never repeats a window");
        assert!(
            (0..3)
                .flat_map(|s| b.batch(s).windows)
                .all(|w| read.contains(&w))
        );
        assert!(!read.contains(&b.batch(3).windows[0]));
        assert_eq!(
            b.windows_read(250).len(),
            100,
            "past an epoch: every window"
        );
    }

    #[test]
    fn eval_covers_the_held_out_stream() {
        let stream = Stream::Memory((0..1000u32).collect());
        let batches = eval_batches(&stream, 10, 32);
        assert_eq!(batches.iter().map(|b| b.batch).sum::<usize>(), 99);
        assert_eq!(batches[0].targets[0], 1);
    }
}

//! Deterministic parallel loops over blocks of rows on the current rayon pool (a worker's own
//! pool under `run --jobs`). Each row is computed whole by one thread and block sizes depend
//! only on the shapes, so a kernel that sums per-block partials in block order gives the same
//! bits whatever the number of threads.

use rayon::prelude::*;

/// Element operations a task should carry at least, so rayon's overhead (a few µs per task)
/// stays small against the work.
const TASK_WORK: usize = 1 << 15;

/// Rows per block for rows of `cost` element operations each.
pub fn block_rows(rows: usize, cost: usize) -> usize {
    (TASK_WORK / cost.max(1)).clamp(1, rows.max(1))
}

/// Calls `f(first_row, out_block)` for blocks of `block` rows of `row_len` values of `out`, in
/// parallel when there is more than one block.
pub fn for_blocks(
    out: &mut [f32],
    row_len: usize,
    block: usize,
    f: impl Fn(usize, &mut [f32]) + Sync,
) {
    let chunk = (block * row_len).max(1);
    if out.len() <= chunk || rayon::current_num_threads() == 1 {
        for (b, o) in out.chunks_mut(chunk).enumerate() {
            f(b * block, o);
        }
    } else {
        out.par_chunks_mut(chunk)
            .enumerate()
            .for_each(|(b, o)| f(b * block, o));
    }
}

/// Like [`for_blocks`] with two outputs of `len_a` and `len_b` values per row.
pub fn for_blocks2(
    a: &mut [f32],
    len_a: usize,
    b: &mut [f32],
    len_b: usize,
    block: usize,
    f: impl Fn(usize, &mut [f32], &mut [f32]) + Sync,
) {
    let (ca, cb) = ((block * len_a).max(1), (block * len_b).max(1));
    if a.len() <= ca || rayon::current_num_threads() == 1 {
        for (i, (x, y)) in a.chunks_mut(ca).zip(b.chunks_mut(cb)).enumerate() {
            f(i * block, x, y);
        }
    } else {
        a.par_chunks_mut(ca)
            .zip(b.par_chunks_mut(cb))
            .enumerate()
            .for_each(|(i, (x, y))| f(i * block, x, y));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cover_every_row_once() {
        let mut out = vec![0.0f32; 10 * 7];
        for_blocks(&mut out, 7, 3, |first, block| {
            for (r, row) in block.chunks_mut(7).enumerate() {
                row.fill((first + r) as f32);
            }
        });
        for (r, row) in out.chunks(7).enumerate() {
            assert!(row.iter().all(|&v| v == r as f32));
        }
    }
}

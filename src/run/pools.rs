//! A rayon thread pool per worker: under `run --jobs N` each worker trains on its own pool, so
//! the runs beside it never queue behind its tasks (they shared rayon's global pool before).
//! The kernels' results do not depend on the number of threads, so a run computes the same
//! numbers whatever pool it gets.

/// Threads for each of `jobs` workers: `threads` when given (non-zero), otherwise the
/// machine's cores shared out evenly, at least one each.
pub(crate) fn threads_per_worker(jobs: usize, threads: usize) -> usize {
    if threads > 0 {
        return threads;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores / jobs.max(1)).max(1)
}

/// Runs `f` on a new pool of `threads` threads named after `worker`; on the global pool if
/// the operating system refuses the threads.
pub fn on_own_pool<R: Send>(threads: usize, worker: usize, f: impl FnOnce() -> R + Send) -> R {
    match rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(move |i| format!("pdsweep-w{worker}-{i}"))
        .build()
    {
        Ok(pool) => pool.install(f),
        Err(_) => f(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_share_the_cores_and_an_explicit_count_wins() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(threads_per_worker(1, 0), cores);
        assert_eq!(threads_per_worker(cores * 2, 0), 1);
        assert_eq!(threads_per_worker(4, 3), 3);
        assert_eq!(on_own_pool(3, 0, rayon::current_num_threads), 3);
    }
}

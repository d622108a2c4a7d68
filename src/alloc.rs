//! Allocator tuning for training on the CPU. burn's CPU backend allocates a fresh buffer for
//! every tensor operation; with glibc's defaults, buffers above 128 KiB are mmap'd and unmapped
//! each time, so every step pays page faults and page zeroing (about a tenth of a step of the
//! reference model in `benches/train_throughput.rs`). Raising the mmap and trim thresholds keeps
//! freed memory in the heap for reuse.

/// Applies the tuning; call once at start-up, before any large allocation. A no-op outside
/// Linux with glibc.
pub fn tune_for_training() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator parameters; it is called before other threads exist.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
        libc::mallopt(libc::M_TOP_PAD, 64 << 20);
    }
}

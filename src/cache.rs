//! Cache hints for the packet path.

/// A hint to pull the cache line holding `*ptr` in; a no-op off x86-64.
#[inline(always)]
pub fn prefetch_read<T>(ptr: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: prefetching is a hint; it never faults, even on an
        // invalid address, and SSE is part of the x86-64 baseline.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(ptr as *const i8) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}

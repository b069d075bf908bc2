//! Admission: every queued packet takes its frame's bytes from the
//! switch's shared buffer until its transmission starts. A packet is
//! dropped (tail drop) when the buffer is full, or when its egress queue
//! is over its dynamic threshold: alpha times the buffer still free
//! (Choudhury and Hahne's dynamic thresholds, the scheme shared-buffer
//! switch ASICs use so that one congested queue cannot take the whole
//! buffer and starve every other port). Lossless classes are admitted by
//! their ingress port instead (`pfc`): they use the shared pool without a
//! per-queue limit, and the headroom reserved per port and lossless
//! priority, which is set aside from the buffer, when it is full.

//!
//! Partitions (Junos's `shared-buffer` ones) cap what the lossless and
//! the lossy classes may hold of the pool, each apart; a lossy queue's
//! dynamic threshold is then alpha times what is free in its partition.

/// Dynamic-threshold alpha in 1/256 units (alpha 8 = 2048).
pub const ALPHA_ONE: u64 = 256;

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct SharedBuffer {
    /// The shared pool: the buffer less the reserved headroom.
    pub capacity: u64,
    pub used: u64,
    pub peak: u64,
    /// PFC headroom in use across the switch's ports.
    pub headroom_used: u64,
    pub headroom_peak: u64,
    /// `None`: a queue may take the whole buffer.
    pub alpha_256: Option<u64>,
    /// The most lossless and lossy classes may hold of the pool
    /// (`u64::MAX`: no partition), and what lossless classes hold.
    pub lossless_cap: u64,
    pub lossy_cap: u64,
    pub lossless_used: u64,
}

impl SharedBuffer {
    pub fn new(capacity: u64, alpha_256: Option<u64>) -> Self {
        SharedBuffer {
            capacity,
            used: 0,
            peak: 0,
            headroom_used: 0,
            headroom_peak: 0,
            alpha_256,
            lossless_cap: u64::MAX,
            lossy_cap: u64::MAX,
            lossless_used: 0,
        }
    }

    /// The same with partitions: lossless and lossy classes may hold at
    /// most these many bytes of the pool.
    pub fn partitioned(mut self, (lossless, lossy): (Option<u64>, Option<u64>)) -> Self {
        self.lossless_cap = lossless.unwrap_or(u64::MAX);
        self.lossy_cap = lossy.unwrap_or(u64::MAX);
        self
    }

    /// Takes `bytes` for a queue now holding `queue_bytes`, if they fit;
    /// `false` means tail drop.
    #[inline]
    pub fn admit(&mut self, bytes: u32, queue_bytes: u32) -> bool {
        let b = bytes as u64;
        // What the lossy partition has free (all that is free without one).
        let free = (self.capacity - self.used).min(
            self.lossy_cap
                .saturating_sub(self.used - self.lossless_used),
        );
        if b > free {
            return false;
        }
        if let Some(a) = self.alpha_256 {
            if (queue_bytes as u64 + b) * ALPHA_ONE > free * a {
                return false;
            }
        }
        self.used += b;
        self.peak = self.peak.max(self.used);
        true
    }

    /// Takes `bytes` from the shared pool with no per-queue limit
    /// (lossless classes).
    #[inline]
    pub fn take(&mut self, bytes: u32) -> bool {
        let b = bytes as u64;
        if self.used + b > self.capacity || self.lossless_used + b > self.lossless_cap {
            return false;
        }
        self.used += b;
        self.lossless_used += b;
        self.peak = self.peak.max(self.used);
        true
    }

    /// Gives back `bytes` a lossless class took (`take`).
    #[inline]
    pub fn release_lossless(&mut self, bytes: u32) {
        self.lossless_used -= bytes as u64;
        self.release(bytes);
    }

    #[inline]
    pub fn release(&mut self, bytes: u32) {
        debug_assert!(
            self.used >= bytes as u64,
            "buffer released more than it held"
        );
        self.used -= bytes as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_drops_when_full_and_frees_on_release() {
        let mut b = SharedBuffer::new(10_000, None);
        assert!(b.admit(6_000, 0));
        assert!(!b.admit(6_000, 0));
        b.release(6_000);
        assert!(b.admit(6_000, 0));
        assert_eq!(b.peak, 6_000);
    }

    /// Partitions cap each kind apart: lossy traffic cannot take what the
    /// lossless partition keeps, and its dynamic threshold sees only its
    /// own partition's free bytes.
    #[test]
    fn partitions_cap_lossless_and_lossy_apart() {
        let mut b = SharedBuffer::new(100_000, None).partitioned((Some(60_000), Some(30_000)));
        let mut lossy = 0;
        while b.admit(1_000, 0) {
            lossy += 1_000;
        }
        assert_eq!(lossy, 30_000);
        let mut lossless = 0;
        while b.take(1_000) {
            lossless += 1_000;
        }
        assert_eq!(lossless, 60_000);
        b.release_lossless(10_000);
        assert!(!b.admit(1_000, 0), "the lossy partition is full");
        assert!(b.take(1_000));
        // Alpha 1 in a 30 KB partition: a lone queue settles at 15 KB.
        let mut b = SharedBuffer::new(100_000, Some(ALPHA_ONE)).partitioned((None, Some(30_000)));
        let mut q = 0;
        while b.admit(1_000, q) {
            q += 1_000;
        }
        assert_eq!(q, 15_000);
    }

    #[test]
    fn dynamic_threshold_keeps_room_for_other_queues() {
        // Alpha 1: one queue alone settles at half the buffer.
        let mut b = SharedBuffer::new(100_000, Some(ALPHA_ONE));
        let mut q = 0;
        while b.admit(1_000, q) {
            q += 1_000;
        }
        assert_eq!(q, 50_000);
        // Another queue still gets in.
        assert!(b.admit(1_000, 0));
        // Alpha 8 lets a lone queue take 8/9 of the buffer.
        let mut b = SharedBuffer::new(90_000, Some(8 * ALPHA_ONE));
        let mut q = 0;
        while b.admit(1_000, q) {
            q += 1_000;
        }
        assert_eq!(q, 80_000);
    }
}

//! Admission: every queued packet takes its frame's bytes from the
//! switch's shared buffer until it has left the wire. When the buffer is
//! full the packet is dropped (tail drop). Per-queue thresholds, dynamic
//! thresholds and PFC headroom come with the lossless-fabric work.

#[derive(Clone, Debug)]
pub struct SharedBuffer {
    pub capacity: u64,
    pub used: u64,
    pub peak: u64,
}

impl SharedBuffer {
    pub fn new(capacity: u64) -> Self {
        SharedBuffer {
            capacity,
            used: 0,
            peak: 0,
        }
    }

    /// Takes `bytes` if they fit; `false` means tail drop.
    #[inline]
    pub fn admit(&mut self, bytes: u32) -> bool {
        if self.used + bytes as u64 > self.capacity {
            return false;
        }
        self.used += bytes as u64;
        self.peak = self.peak.max(self.used);
        true
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
        let mut b = SharedBuffer::new(10_000);
        assert!(b.admit(6_000));
        assert!(!b.admit(6_000));
        b.release(6_000);
        assert!(b.admit(6_000));
        assert_eq!(b.peak, 6_000);
    }
}

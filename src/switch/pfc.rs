//! Priority flow control (IEEE 802.1Qbb), DSCP-based: per port and per
//! lossless priority, the ingress accounting that decides when to pause
//! the link partner, and the receive side that records pauses honoured.
//!
//! A lossless packet is charged to the port it came in on. While that
//! port's bytes stay under xOFF and the shared pool has room, it takes
//! shared buffer; otherwise it goes into the port's headroom, reserved
//! for what is still in flight once a pause is sent, and the port pauses
//! its partner. The pause is refreshed before it expires while the port
//! stays congested and lifted with a resume (quanta 0) once its bytes fall
//! to xON. Only a packet that finds the headroom full is dropped, which
//! cannot happen when the headroom is at least `qos::headroom_needed`.
//! Bytes leave from the headroom first.

use super::admit::SharedBuffer;
use super::qos::PortPfc;
use crate::units::SimTime;

/// PFC state of one port for one lossless priority. What every lossless
/// packet reads and writes (thresholds, bytes, flags) comes first, in the
/// entry's first cache line; counters follow.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
#[repr(C, align(64))]
pub struct PfcPrio {
    pub cfg: PortPfc,
    /// Bytes buffered in this switch that came in on this port.
    pub bytes: u32,
    pub headroom_used: u32,
    pub peak_bytes: u32,
    pub peak_headroom: u32,
    /// The partner is paused (a pause was sent and not yet lifted).
    pub pausing: bool,
    /// A NIC pause storm holds the pause regardless of bytes.
    pub storm: bool,
    pub refresh_pending: bool,
    pub watchdog_pending: bool,
    pub pauses_sent: u64,
    pub resumes_sent: u64,
    pub first_pause: Option<SimTime>,
    // The transmit side of this port, paused by the partner.
    pub pauses_received: u64,
    pub resumes_received: u64,
    /// Start of the current paused stretch, if one is open.
    pub paused_since: Option<SimTime>,
    pub paused_ps: u64,
    /// Until then the watchdog overrides pauses on this queue.
    pub watchdog_until: SimTime,
    pub watchdog_events: u64,
    pub lossless_drops: u64,
    /// PFC frames that came in while PFC is off here.
    pub pauses_ignored: u64,
}

/// What admission decided for a lossless packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Admission {
    pub admitted: bool,
    /// The port just crossed into congestion: pause the partner.
    pub send_pause: bool,
}

impl PfcPrio {
    pub fn new(cfg: PortPfc) -> Self {
        PfcPrio {
            cfg,
            ..Default::default()
        }
    }

    /// Charges a lossless packet of `b` buffer bytes to this port.
    #[inline]
    pub fn admit(&mut self, b: u32, shared: &mut SharedBuffer) -> Admission {
        let under_xoff = self.bytes + b <= self.cfg.xoff;
        if under_xoff && self.headroom_used == 0 && shared.take(b) {
            // Shared pool.
        } else if self.headroom_used + b <= self.cfg.headroom {
            self.headroom_used += b;
            shared.headroom_used += b as u64;
            shared.headroom_peak = shared.headroom_peak.max(shared.headroom_used);
            self.peak_headroom = self.peak_headroom.max(self.headroom_used);
        } else {
            self.lossless_drops += 1;
            return Admission {
                admitted: false,
                send_pause: !self.pausing,
            };
        }
        self.bytes += b;
        self.peak_bytes = self.peak_bytes.max(self.bytes);
        let congested = self.bytes >= self.cfg.xoff || self.headroom_used > 0;
        Admission {
            admitted: true,
            send_pause: congested && !self.pausing,
        }
    }

    /// Releases `b` bytes charged to this port; true when the partner
    /// should now be resumed.
    #[inline]
    pub fn release(&mut self, b: u32, shared: &mut SharedBuffer) -> bool {
        let h = self.headroom_used.min(b);
        self.headroom_used -= h;
        shared.headroom_used -= h as u64;
        shared.release_lossless(b - h);
        self.bytes -= b;
        self.pausing && !self.storm && self.bytes <= self.cfg.xon && self.headroom_used == 0
    }

    /// Closes the open paused stretch at `end`.
    pub fn close_paused(&mut self, end: SimTime) {
        if let Some(since) = self.paused_since.take() {
            self.paused_ps += end.saturating_sub(since).0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(xoff: u32, xon: u32, headroom: u32) -> PfcPrio {
        PfcPrio::new(PortPfc {
            xoff,
            xon,
            headroom,
            headroom_needed: headroom,
            ..PortPfc::default()
        })
    }

    #[test]
    fn pauses_at_xoff_uses_headroom_then_resumes_at_xon() {
        let mut shared = SharedBuffer::new(1_000_000, None);
        let mut p = port(3000, 1000, 2000);
        assert_eq!(
            p.admit(1000, &mut shared),
            Admission {
                admitted: true,
                send_pause: false
            }
        );
        p.admit(1000, &mut shared);
        // The third reaches xOFF.
        assert!(p.admit(1000, &mut shared).send_pause);
        p.pausing = true;
        // Beyond xOFF, headroom takes what is in flight...
        assert!(p.admit(1000, &mut shared).admitted);
        assert!(p.admit(1000, &mut shared).admitted);
        assert_eq!(p.headroom_used, 2000);
        // ...and a packet beyond it is a lossless drop.
        assert!(!p.admit(1000, &mut shared).admitted);
        assert_eq!(p.lossless_drops, 1);
        assert_eq!(shared.used, 3000);
        // Draining: headroom first, resume once at xON.
        assert!(!p.release(1000, &mut shared));
        assert!(!p.release(1000, &mut shared));
        assert!(!p.release(1000, &mut shared));
        assert!(p.release(1000, &mut shared));
        assert_eq!((shared.used, shared.headroom_used), (1000, 0));
    }

    #[test]
    fn a_full_shared_pool_sends_packets_to_headroom_and_pauses() {
        let mut shared = SharedBuffer::new(1500, None);
        let mut p = port(100_000, 1000, 5000);
        assert!(!p.admit(1000, &mut shared).send_pause);
        let a = p.admit(1000, &mut shared);
        assert!(a.admitted && a.send_pause);
        assert_eq!(p.headroom_used, 1000);
    }
}

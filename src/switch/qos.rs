//! Quality of service as a scenario configures it: traffic classes (DSCP
//! to queue), how each egress queue is scheduled, which classes are
//! lossless (PFC), and their WRED/ECN and PFC thresholds.
//!
//! Thresholds left unset follow the congestion-control preset and scale
//! with each port's speed, so one scenario works on 100G and 800G ports;
//! `PortQos::resolve` turns the class settings into the byte values one
//! port uses.

use super::classify::{ClassMap, QUEUES};
use crate::nic::dcqcn::DcqcnParams;
use crate::topology::{PortId, Topology};
use crate::units::{Rate, SimTime};
use crate::wire::frame::{self, Opcode};

/// Where WRED looks at the queue and marks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum MarkPoint {
    /// When the packet joins the queue (the depth ahead of it).
    Enqueue,
    /// When the packet leaves (the depth behind it): feedback one queue
    /// delay sooner.
    Dequeue,
}

impl MarkPoint {
    pub fn name(self) -> &'static str {
        match self {
            MarkPoint::Enqueue => "enqueue",
            MarkPoint::Dequeue => "dequeue",
        }
    }
}

/// WRED settings of one class; `None` values follow the preset.
#[derive(Clone, Debug, PartialEq)]
pub struct WredConfig {
    pub min: Option<u64>,
    pub max: Option<u64>,
    pub max_probability: Option<f64>,
    /// Averaging weight w: avg += (depth - avg) / 2^w; 0 = instantaneous.
    pub weight: u8,
}

/// A byte threshold given in the scenario or derived per port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bytes {
    Auto,
    Given(u64),
}

/// Settings of one egress queue (one traffic class).
#[derive(Clone, Debug)]
pub struct QueueConfig {
    /// Class name, empty for a queue no class uses.
    pub name: String,
    pub strict: bool,
    /// Bandwidth remaining percent (deficit round robin among the
    /// non-strict queues).
    pub percent: u32,
    /// PFC on: never dropped for lack of buffer, paused instead.
    pub lossless: bool,
    /// WRED marks ECT packets instead of dropping them.
    pub ecn: bool,
    /// A data packet that would be dropped is trimmed to its headers and
    /// forwarded at high priority instead.
    pub trim: bool,
    /// Largest frame the class carries, destination MAC to FCS.
    pub mtu: u32,
    pub wred: Option<WredConfig>,
    pub xoff: Bytes,
    pub xon: Bytes,
    pub headroom: Bytes,
    /// At most this many bits per second out of each switch port (a
    /// shaper: frames wait in the queue), if set.
    pub shape_bps: Option<u64>,
    /// The priority a switch's pause frames name for this lossless queue,
    /// and whose pauses stop it (`None`: the queue's number).
    pub pfc_priority: Option<u8>,
}

impl QueueConfig {
    pub fn unused() -> Self {
        QueueConfig {
            name: String::new(),
            strict: false,
            percent: 0,
            lossless: false,
            ecn: false,
            trim: false,
            mtu: 9216,
            wred: None,
            xoff: Bytes::Auto,
            xon: Bytes::Auto,
            headroom: Bytes::Auto,
            shape_bps: None,
            pfc_priority: None,
        }
    }
}

/// What the PFC watchdog does to a queue it finds stuck.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum WatchdogAction {
    /// Discard the queue's packets, and those that arrive for it, while
    /// ignoring pauses for the recovery time.
    Drop,
    /// Ignore pauses for the recovery time and keep sending.
    Ignore,
}

impl WatchdogAction {
    pub fn name(self) -> &'static str {
        match self {
            WatchdogAction::Drop => "drop",
            WatchdogAction::Ignore => "ignore",
        }
    }
}

#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub struct Watchdog {
    /// A queue paused this long with frames waiting is stuck.
    pub interval: SimTime,
    pub action: WatchdogAction,
    /// How long the action lasts before the queue honours pauses again.
    pub recovery: SimTime,
}

/// A NIC that keeps pausing its switch port: the stuck pause a watchdog
/// exists for (a faulty NIC or a host that stopped draining).
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub struct PauseStorm {
    pub gpu: crate::topology::GpuId,
    pub priority: u8,
    pub start: SimTime,
    pub stop: Option<SimTime>,
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct PfcConfig {
    /// Pause time put in each pause frame, in quanta of 512 bit times.
    pub quanta: u16,
    /// How often a pause is re-sent while congestion lasts; `None`: half
    /// the pause time.
    pub refresh: Option<SimTime>,
    /// Delay between a pause frame's arrival and the peer's transmitter
    /// honouring it.
    pub response_time: SimTime,
    pub watchdog: Option<Watchdog>,
    pub storms: Vec<PauseStorm>,
}

impl Default for PfcConfig {
    fn default() -> Self {
        PfcConfig {
            quanta: 0xFFFF,
            refresh: None,
            response_time: SimTime::ZERO,
            watchdog: None,
            storms: Vec::new(),
        }
    }
}

/// Picoseconds one pause quantum (512 bit times) lasts at `rate`.
pub fn pause_time(quanta: u16, rate: Rate) -> SimTime {
    rate.serialize(quanta as u64 * 64)
}

#[derive(Clone, Debug)]
pub struct QosConfig {
    pub map: ClassMap,
    /// Whether RoCEv2 frames carry an 802.1Q tag.
    pub framing: frame::Framing,
    /// The VLAN ID tagged frames carry where the topology's rails are
    /// not VLANs of their own.
    pub vlan_id: u16,
    pub queues: [QueueConfig; QUEUES],
    pub mark_on: MarkPoint,
    pub pfc: PfcConfig,
}

impl QosConfig {
    /// The RoCEv2 deployment the seeds describe: DSCP 24 to lossless queue
    /// 3 with ECN (half the bandwidth left after strict priority), DSCP 48
    /// (CNP) to strict-priority queue 7, everything else to queue 0.
    pub fn rocev2_default() -> Self {
        let mut queues: [QueueConfig; QUEUES] = std::array::from_fn(|_| QueueConfig::unused());
        queues[0] = QueueConfig {
            name: "default".into(),
            percent: 50,
            ..QueueConfig::unused()
        };
        queues[3] = QueueConfig {
            name: "rocev2".into(),
            percent: 50,
            lossless: true,
            ecn: true,
            wred: Some(WredConfig {
                min: None,
                max: None,
                max_probability: None,
                weight: 0,
            }),
            ..QueueConfig::unused()
        };
        queues[7] = QueueConfig {
            name: "cnp".into(),
            strict: true,
            ..QueueConfig::unused()
        };
        QosConfig {
            map: ClassMap::default(),
            framing: frame::Framing::default(),
            vlan_id: 0,
            queues,
            mark_on: MarkPoint::Dequeue,
            pfc: PfcConfig::default(),
        }
    }

    /// Bit i set when queue i is lossless.
    pub fn lossless_mask(&self) -> u8 {
        (0..QUEUES).fold(0, |m, q| m | (u8::from(self.queues[q].lossless) << q))
    }

    /// Largest frame any class carries (bytes on the wire).
    pub fn max_wire_frame(&self) -> u32 {
        self.queues.iter().map(|q| q.mtu).max().unwrap_or(9216) + frame::PREAMBLE_SFD_IFG
    }
}

/// WRED as one port applies it to one queue, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PortWred {
    pub min: u32,
    pub max: u32,
    /// Marking probability at `max`, in units of 2^-32.
    pub pmax_u32: u64,
    pub weight: u8,
    pub ecn: bool,
}

/// PFC as one port applies it to one lossless priority, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PortPfc {
    pub xoff: u32,
    pub xon: u32,
    pub headroom: u32,
    /// What the headroom must hold for no lossless drop (see `headroom`).
    pub headroom_needed: u32,
    /// PFC is off on this port (by configuration, or not negotiated with
    /// the other end): its lossless classes come in as lossy ones, it
    /// sends no pause and ignores those it gets.
    #[serde(default)]
    pub off: bool,
}

/// The headroom one ingress port needs per lossless priority: every byte
/// that can still arrive once it decides to pause. That is the frame that
/// found no room (it is the first in headroom), then, at line rate, what
/// arrives while a frame of ours already on the wire finishes (the pause
/// waits behind it), the pause frame is sent, it flies to the peer, the
/// peer responds, the frame the peer is sending when the pause takes
/// effect finishes, and that frame flies back. `max_frame` is the largest
/// frame on the link with preamble and gap.
pub fn headroom_needed(rate: Rate, delay: SimTime, response: SimTime, max_frame: u32) -> u64 {
    let flight = SimTime(2 * delay.0 + response.0);
    let bytes_in_flight = (rate.bps() as u128 * flight.0 as u128).div_ceil(8_000_000_000_000);
    bytes_in_flight as u64 + 3 * max_frame as u64 + frame::wire_bytes(Opcode::Pause, 0) as u64
}

impl PortWred {
    /// The WRED thresholds of `queue` on a port of `speed`, or `None` if
    /// the class has no WRED.
    pub fn resolve(q: &QueueConfig, preset: &DcqcnParams, speed: Rate) -> Option<PortWred> {
        let w = q.wred.as_ref()?;
        let (kmin, kmax) = preset.thresholds_at(speed);
        let min = w.min.unwrap_or(kmin).min(u32::MAX as u64) as u32;
        let max = w.max.unwrap_or(kmax).min(u32::MAX as u64) as u32;
        let p = w.max_probability.unwrap_or(preset.pmax);
        Some(PortWred {
            min,
            max,
            pmax_u32: (p * 4_294_967_296.0).round() as u64,
            weight: w.weight,
            ecn: q.ecn,
        })
    }
}

impl PortPfc {
    /// PFC thresholds of a lossless `queue` on a port of `speed` whose
    /// link has `delay` and carries frames up to `max_frame`.
    pub fn resolve(
        q: &QueueConfig,
        preset: &DcqcnParams,
        pfc: &PfcConfig,
        speed: Rate,
        delay: SimTime,
        max_frame: u32,
    ) -> PortPfc {
        let (kmin, kmax) = preset.thresholds_at(speed);
        let (kmin, kmax) = match &q.wred {
            Some(w) => (w.min.unwrap_or(kmin), w.max.unwrap_or(kmax)),
            None => (kmin, kmax),
        };
        let needed = headroom_needed(speed, delay, pfc.response_time, max_frame);
        let clamp = |b: u64| b.min(u32::MAX as u64 / 2) as u32;
        PortPfc {
            xoff: clamp(match q.xoff {
                Bytes::Given(b) => b,
                Bytes::Auto => kmax + kmin,
            }),
            xon: clamp(match q.xon {
                Bytes::Given(b) => b,
                Bytes::Auto => kmin / 2,
            }),
            headroom: clamp(match q.headroom {
                Bytes::Given(b) => b,
                Bytes::Auto => needed,
            }),
            headroom_needed: clamp(needed),
            off: false,
        }
    }
}

/// Every port's PFC for each lossless priority and WRED for each queue,
/// resolved once from the classes, the DCQCN preset (which sets
/// thresholds left unset) and each port's speed and link delay. The
/// checks, `validate`'s description and the run all read this table.
#[derive(Clone, Debug, Default)]
pub struct PfcTable {
    /// Slot of each priority, `NO_SLOT` (`u8::MAX`) if it is not lossless.
    pub slot: [u8; QUEUES],
    /// Lossless priorities: entries per port.
    pub slots: usize,
    /// `ports[port * slots + slot]`.
    pub ports: Vec<PortPfc>,
    /// WRED of each queue at each link speed of the fabric (WRED depends
    /// on the speed alone).
    pub wred: Vec<(Rate, [Option<PortWred>; QUEUES])>,
}

impl PfcTable {
    pub fn resolve(topo: &Topology, qos: &QosConfig, preset: &DcqcnParams) -> PfcTable {
        let mut slot = [u8::MAX; QUEUES];
        let mut slots = 0;
        for (q, s) in slot.iter_mut().enumerate() {
            if qos.queues[q].lossless {
                *s = slots as u8;
                slots += 1;
            }
        }
        let max_frame = qos.max_wire_frame();
        let mut ports = Vec::with_capacity(topo.ports.len() * slots);
        for port in &topo.ports {
            for qc in qos.queues.iter().filter(|qc| qc.lossless) {
                ports.push(PortPfc::resolve(
                    qc, preset, &qos.pfc, port.rate, port.delay, max_frame,
                ));
            }
        }
        let mut wred: Vec<(Rate, [Option<PortWred>; QUEUES])> = Vec::new();
        for port in &topo.ports {
            if !wred.iter().any(|(r, _)| *r == port.rate) {
                let per_queue =
                    std::array::from_fn(|q| PortWred::resolve(&qos.queues[q], preset, port.rate));
                wred.push((port.rate, per_queue));
            }
        }
        PfcTable {
            slot,
            slots,
            ports,
            wred,
        }
    }

    /// WRED of `queue` on a port of `rate`.
    pub fn wred_at(&self, rate: Rate, queue: usize) -> Option<PortWred> {
        self.wred
            .iter()
            .find(|(r, _)| *r == rate)
            .and_then(|(_, w)| w[queue])
    }

    /// The flow level's PFC (`fluid::pfc`): by port, the first lossless
    /// priority's xOFF at the ingress its link enters (infinite where
    /// that is a NIC or PFC is off there).
    pub fn fluid_xoff(&self, topo: &crate::topology::Topology) -> Vec<f64> {
        let slot = self.slot.iter().copied().find(|&s| s != u8::MAX);
        topo.ports
            .iter()
            .map(|p| {
                let at = slot.and_then(|s| self.ports.get(p.peer.idx() * self.slots + s as usize));
                match (topo.port(p.peer).owner, at) {
                    (crate::topology::Owner::Switch(_), Some(c)) if !c.off => f64::from(c.xoff),
                    _ => f64::INFINITY,
                }
            })
            .collect()
    }

    /// The flow level's WRED with ECN (`fluid::cc`) on `queue` of each
    /// port of `topo`: a switch port's, where it marks; none on NIC ports
    /// nor on the ports `dlb` flags (DLB takes their egress QoS away).
    pub fn fluid_marking(
        &self,
        topo: &crate::topology::Topology,
        queue: usize,
        dlb: &[bool],
    ) -> Vec<Option<crate::fluid::Marking>> {
        let marks = |p: &crate::topology::Port| {
            self.wred_at(p.rate, queue)
                .filter(|w| w.ecn)
                .map(|w| crate::fluid::Marking {
                    min: f64::from(w.min),
                    max: f64::from(w.max),
                    pmax: w.pmax_u32 as f64 / 4_294_967_296.0,
                })
        };
        topo.ports
            .iter()
            .enumerate()
            .map(|(i, p)| match p.owner {
                crate::topology::Owner::Switch(_) if !dlb.get(i).copied().unwrap_or(false) => {
                    marks(p)
                }
                _ => None,
            })
            .collect()
    }

    /// Turns PFC off on port `p` for every lossless priority.
    pub fn set_off(&mut self, p: PortId) {
        for e in &mut self.ports[p.idx() * self.slots..(p.idx() + 1) * self.slots] {
            e.off = true;
        }
    }

    /// Port `p`'s PFC for lossless priority `queue`.
    pub fn get(&self, p: PortId, queue: usize) -> Option<&PortPfc> {
        let s = self.slot[queue];
        (s != u8::MAX).then(|| &self.ports[p.idx() * self.slots + s as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pause_quanta_are_512_bit_times() {
        // 0xFFFF quanta at 400G: 65535 * 512 / 400e9 s = 83.88 us.
        assert_eq!(pause_time(0xFFFF, Rate::gbps(400)), SimTime(83_884_800));
        assert_eq!(pause_time(1, Rate::gbps(400)), SimTime(1_280));
    }

    #[test]
    fn headroom_covers_round_trip_and_three_frames() {
        // 100G, 1 us each way, no response delay, 9236 B frames on the wire:
        // 2 us at 100G is 25000 B, plus three frames and an 84 B pause.
        let h = headroom_needed(Rate::gbps(100), SimTime::from_us(1), SimTime::ZERO, 9236);
        assert_eq!(h, 25_000 + 3 * 9236 + 84);
    }
}

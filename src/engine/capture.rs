//! Packet capture: frames put on chosen links, or of chosen flows, within
//! a time window, encoded as on the wire and handed to a `FrameSink` (the
//! report's pcapng writer: one interface per link, nanosecond timestamps
//! at the first bit on the wire, for Wireshark and tshark).

use super::Simulation;
use crate::topology::{Owner, PortId, Topology};
use crate::units::SimTime;
use crate::wire::encode::{self, Context};
use crate::wire::Opcode;

/// Where captured frames go. Links are numbered in the order `link`
/// announces them, from 0.
pub trait FrameSink: Send {
    /// A link seen for the first time: its name and speed.
    fn link(&mut self, name: &str, bits_per_second: u64) -> std::io::Result<()>;
    /// A frame that started on `link` at `ns` nanoseconds.
    fn frame(&mut self, link: u32, ns: u64, bytes: &[u8]) -> std::io::Result<()>;
    fn flush(&mut self) -> std::io::Result<()>;
}

/// What to capture, as the command line gives it.
#[derive(Clone, Debug, Default)]
pub struct CaptureSpec {
    /// `link=NAME` values: `from->to` (one direction of a link, as named
    /// in `links.csv`) or a device name (every link to or from it).
    pub links: Vec<String>,
    /// `flow=ID` values: data, ACKs, NAKs and CNPs of these transfers.
    pub flows: Vec<u32>,
    pub start: SimTime,
    pub end: SimTime,
    /// Most frames written; later ones are counted, not written.
    pub limit: u64,
}

impl CaptureSpec {
    /// Parses `--capture` values: `all`, `link=NAME`, `flow=ID`.
    pub fn parse(values: &[String]) -> Result<CaptureSpec, String> {
        let mut spec = CaptureSpec {
            end: SimTime::MAX,
            limit: 1_000_000,
            ..Default::default()
        };
        for v in values {
            if v == "all" {
                continue;
            } else if let Some(name) = v.strip_prefix("link=") {
                spec.links.push(name.to_string());
            } else if let Some(id) = v.strip_prefix("flow=") {
                let id = id.parse().map_err(|_| {
                    format!(
                        "--capture {v}: expected flow=ID with ID a transfer number from flows.csv"
                    )
                })?;
                spec.flows.push(id);
            } else {
                return Err(format!(
                    "--capture {v}: expected `all`, `link=FROM->TO`, `link=DEVICE` or `flow=ID`"
                ));
            }
        }
        Ok(spec)
    }

    /// Parses `--capture-window FROM..TO` (either end may be left out).
    pub fn set_window(&mut self, window: &str) -> Result<(), String> {
        let bad = || {
            format!("--capture-window {window}: expected FROM..TO with times such as 10us..2ms (either may be left out)")
        };
        let (a, b) = window.split_once("..").ok_or_else(bad)?;
        let time = |s: &str, default: SimTime| -> Result<SimTime, String> {
            if s.trim().is_empty() {
                return Ok(default);
            }
            crate::units::parse_time(s.trim()).ok_or_else(bad)
        };
        self.start = time(a, SimTime::ZERO)?;
        self.end = time(b, SimTime::MAX)?;
        if self.end <= self.start {
            return Err(format!(
                "--capture-window {window}: the window ends before it starts"
            ));
        }
        Ok(())
    }
}

/// A frame a partition of a parallel run captured, kept to be merged with
/// the others' in the order one queue would have written them: by time,
/// then the key of the event that sent it, then its place among that
/// event's frames. Its bytes wait in the partition's spill file.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Recorded {
    order: (u64, u32, u32),
    port: PortId,
    /// Which spill file (by partition), where in it, how long.
    file: u32,
    at: u64,
    len: u32,
}

/// A partition's capture packed for another process (`Capture::pack`).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Packed {
    frames: u64,
    over_limit: u64,
    error: Option<String>,
    recorded: Vec<Recorded>,
    /// The spill file's bytes, which `recorded` points into.
    bytes: Vec<u8>,
}

/// What a partition of a parallel run keeps of its capture: the order of
/// its frames in memory (24 B each), their bytes in an anonymous
/// temporary file, removed when closed.
struct Kept {
    frames: Vec<Recorded>,
    /// Spill files by partition (one until partitions' are merged).
    files: Vec<std::fs::File>,
    out: std::io::BufWriter<std::fs::File>,
    written: u64,
}

impl Kept {
    fn new() -> std::io::Result<Kept> {
        let file = tempfile::tempfile()?;
        Ok(Kept {
            frames: Vec::new(),
            out: std::io::BufWriter::new(file.try_clone()?),
            files: vec![file],
            written: 0,
        })
    }

    fn push(&mut self, order: (u64, u32, u32), port: PortId, bytes: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        self.out.write_all(bytes)?;
        self.frames.push(Recorded {
            order,
            port,
            file: 0,
            at: self.written,
            len: bytes.len() as u32,
        });
        self.written += bytes.len() as u64;
        Ok(())
    }
}

/// A capture that writes nothing itself: a partition's, whose frames
/// partition 0 writes.
pub struct NoSink;

impl FrameSink for NoSink {
    fn link(&mut self, _: &str, _: u64) -> std::io::Result<()> {
        Ok(())
    }
    fn frame(&mut self, _: u32, _: u64, _: &[u8]) -> std::io::Result<()> {
        Ok(())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A capture in progress.
pub struct Capture {
    /// Per port: selected (empty: every port).
    ports: Vec<bool>,
    /// Per QP: selected (empty: every frame, PFC and heartbeats too).
    qps: Vec<bool>,
    start: SimTime,
    end: SimTime,
    limit: u64,
    out: Box<dyn FrameSink>,
    /// Per port: its pcapng interface, `u32::MAX` until its first frame.
    iface: Vec<u32>,
    ifaces: u32,
    pub frames: u64,
    pub over_limit: u64,
    pub error: Option<std::io::Error>,
    /// In a partition of a parallel run: the frames, kept to be merged.
    recorded: Option<Kept>,
    /// The event the last frame was captured in, and how many it sent.
    last: (u64, u32, u32),
}

impl Capture {
    /// The same capture for another partition of a parallel run, which
    /// keeps its frames to be merged.
    pub(super) fn for_partition(&self) -> Capture {
        let (recorded, error) = match Kept::new() {
            Ok(k) => (Some(k), None),
            Err(e) => (None, Some(e)),
        };
        Capture {
            ports: self.ports.clone(),
            qps: self.qps.clone(),
            start: self.start,
            end: self.end,
            limit: self.limit,
            out: Box::new(NoSink),
            iface: vec![u32::MAX; self.iface.len()],
            ifaces: 0,
            frames: 0,
            over_limit: 0,
            error,
            recorded,
            last: (u64::MAX, 0, 0),
        }
    }

    /// This capture keeps its frames to be merged (partition 0 of a
    /// parallel run; it writes them all at the end).
    pub(super) fn record(&mut self) {
        match Kept::new() {
            Ok(k) => self.recorded = Some(k),
            Err(e) => self.error = Some(e),
        }
    }

    /// Takes the frames, counts and error of `other`, another partition's
    /// capture.
    pub(super) fn absorb(&mut self, mut other: Capture) {
        use std::io::Write;
        if let (Some(mine), Some(mut theirs)) = (&mut self.recorded, other.recorded.take()) {
            if let Err(e) = theirs.out.flush() {
                self.error.get_or_insert(e);
            }
            let file = mine.files.len() as u32;
            mine.files.append(&mut theirs.files);
            mine.frames
                .extend(theirs.frames.into_iter().map(|r| Recorded { file, ..r }));
        }
        if let Some(e) = other.error {
            self.error.get_or_insert(e);
        }
        self.frames += other.frames;
        self.over_limit += other.over_limit;
    }

    /// This partition's capture as bytes, for a partition in another
    /// process: its counts, error and kept frames with their bytes.
    pub(super) fn pack(mut self) -> Packed {
        use std::io::{Read, Seek, Write};
        let mut packed = Packed {
            frames: self.frames,
            over_limit: self.over_limit,
            error: self.error.take().map(|e| e.to_string()),
            recorded: Vec::new(),
            bytes: Vec::new(),
        };
        if let Some(mut kept) = self.recorded.take() {
            let read = (|| {
                kept.out.flush()?;
                let mut file = kept.files.swap_remove(0);
                file.rewind()?;
                file.read_to_end(&mut packed.bytes)
            })();
            match read {
                Ok(_) => packed.recorded = kept.frames,
                Err(e) => {
                    packed.error.get_or_insert(e.to_string());
                }
            }
        }
        packed
    }

    /// Takes the frames, counts and error of another process's partition
    /// (`pack`), as `absorb` does another thread's.
    pub(super) fn unpack(&mut self, other: Packed) {
        use std::io::Write;
        if let Some(e) = other.error {
            self.error
                .get_or_insert(std::io::Error::other(format!("in another process: {e}")));
        }
        self.frames += other.frames;
        self.over_limit += other.over_limit;
        let Some(mine) = &mut self.recorded else {
            return;
        };
        let spilled = (|| {
            let mut file = tempfile::tempfile()?;
            file.write_all(&other.bytes)?;
            Ok::<_, std::io::Error>(file)
        })();
        match spilled {
            Ok(file) => {
                let at = mine.files.len() as u32;
                mine.files.push(file);
                mine.frames.extend(
                    other
                        .recorded
                        .into_iter()
                        .map(|r| Recorded { file: at, ..r }),
                );
            }
            Err(e) => {
                self.error.get_or_insert(e);
            }
        }
    }

    /// Writes the frames every partition kept, in one queue's order, the
    /// first `limit` of them (each partition kept its own first `limit`,
    /// so none of those is missing), numbering links as they first
    /// appear.
    pub(super) fn write_recorded(&mut self, topo: &Topology) {
        use std::io::Write;
        use std::os::unix::fs::FileExt;
        let Some(mut kept) = self.recorded.take() else {
            return;
        };
        if let Err(e) = kept.out.flush() {
            self.error.get_or_insert(e);
        }
        let total = self.frames + self.over_limit;
        self.over_limit = total - total.min(self.limit);
        self.frames = 0;
        if self.error.is_some() {
            return;
        }
        kept.frames.sort_by_key(|r| r.order);
        kept.frames.truncate(self.limit as usize);
        let mut bytes = Vec::new();
        for r in &kept.frames {
            let p = r.port;
            let result = (|| {
                bytes.resize(r.len as usize, 0);
                kept.files[r.file as usize].read_exact_at(&mut bytes, r.at)?;
                if self.iface[p.idx()] == u32::MAX {
                    self.iface[p.idx()] = self.ifaces;
                    self.ifaces += 1;
                    self.out.link(&topo.link_name(p), topo.port(p).rate.bps())?;
                }
                self.out
                    .frame(self.iface[p.idx()], r.order.0 / 1000, &bytes)
            })();
            match result {
                Ok(()) => self.frames += 1,
                Err(e) => {
                    self.error = Some(e);
                    return;
                }
            }
        }
    }
}

fn ports_named(topo: &Topology, name: &str) -> Vec<PortId> {
    (0..topo.ports.len() as u32)
        .map(PortId)
        .filter(|&p| {
            let from = topo.owner_name(p);
            let to = topo.owner_name(topo.port(p).peer);
            topo.link_name(p) == name
                || format!("{from}->{to}") == name
                || from == name
                || to == name
        })
        .collect()
}

impl Simulation {
    /// Starts capturing into `out`.
    pub fn start_capture(
        &mut self,
        spec: &CaptureSpec,
        out: Box<dyn FrameSink>,
    ) -> Result<(), String> {
        let mut ports = Vec::new();
        if !spec.links.is_empty() {
            ports = vec![false; self.topo.ports.len()];
            for name in &spec.links {
                let found = ports_named(&self.topo, name);
                if found.is_empty() {
                    return Err(format!(
                        "--capture link={name}: no link or device has this name; links are named FROM->TO as in links.csv (e.g. {})",
                        self.topo.link_name(PortId(0))
                    ));
                }
                for p in found {
                    ports[p.idx()] = true;
                }
            }
        }
        let mut qps = Vec::new();
        if !spec.flows.is_empty() {
            qps = vec![false; self.nics.qps().len()];
            for &f in &spec.flows {
                let flow = self.jobs().flows.get(f as usize).ok_or_else(|| {
                    format!(
                        "--capture flow={f}: there are {} transfers (0 to {})",
                        self.jobs().flows.len(),
                        self.jobs().flows.len().saturating_sub(1)
                    )
                })?;
                for q in flow.first_qp..flow.first_qp + flow.n_qps {
                    qps[q as usize] = true;
                }
            }
        }
        self.egress.capturing = true;
        self.capture = Some(Box::new(Capture {
            ports,
            qps,
            start: spec.start,
            end: spec.end,
            limit: spec.limit,
            out,
            iface: vec![u32::MAX; self.topo.ports.len()],
            ifaces: 0,
            frames: 0,
            over_limit: 0,
            error: None,
            recorded: None,
            last: (u64::MAX, 0, 0),
        }));
        Ok(())
    }

    /// Flushes the capture; how many frames it holds, on how many links,
    /// and how many the limit kept out.
    pub fn finish_capture(&mut self) -> Option<Result<(u64, u32, u64), String>> {
        let mut c = self.capture.take()?;
        self.egress.capturing = false;
        let flushed = c.out.flush();
        Some(match c.error.take().map_or(flushed, Err) {
            Ok(()) => Ok((c.frames, c.ifaces, c.over_limit)),
            Err(e) => Err(format!("cannot write the capture: {e}")),
        })
    }

    /// A frame starts on the link out of port `p`.
    pub(super) fn capture_frame(
        &mut self,
        p: PortId,
        pkt: &crate::wire::Packet,
        int: Option<&crate::wire::int::Int>,
    ) {
        let now = self.now;
        if self.capture.is_none() {
            return;
        }
        // The length of the write: its transfer's share on this QP.
        let write = if pkt.opcode.has_reth() {
            let f = crate::topology::FlowId(pkt.flow);
            self.runtime(|rt, k| rt.write_of(k, f))
        } else {
            None
        };
        let Some(c) = self.capture.as_deref_mut() else {
            return;
        };
        if now < c.start || now >= c.end || c.error.is_some() {
            return;
        }
        if !c.ports.is_empty() && !c.ports[p.idx()] {
            return;
        }
        let link_local = matches!(pkt.opcode, Opcode::Pause | Opcode::Heartbeat);
        if !c.qps.is_empty() && (link_local || !c.qps[pkt.qp.idx()]) {
            return;
        }
        if c.frames == c.limit {
            c.over_limit += 1;
            return;
        }
        let topo = &self.topo;
        let peer = topo.port(p).peer;
        let (src_ip, dst_ip) = if pkt.opcode == Opcode::Heartbeat {
            let ip = |q: PortId| match topo.port(q).owner {
                Owner::Switch(s) => encode::switch_ip(s.0),
                Owner::Nic(n) => encode::nic_ip(n.0),
            };
            (ip(p), ip(peer))
        } else {
            (encode::nic_ip(pkt.src.0), encode::nic_ip(pkt.dst.0))
        };
        let dma_length = match write {
            Some((bytes, first_qp, n)) => {
                let i = pkt.qp.0.wrapping_sub(first_qp);
                super::build::share(bytes, n, i).min(u32::MAX as u64) as u32
            }
            _ => 0,
        };
        let ctx = Context {
            src_mac: encode::port_mac(p.0),
            dst_mac: encode::port_mac(peer.0),
            src_ip,
            dst_ip,
            dma_length,
            vlan_tci: self.scenario.qos.framing.tags(pkt.opcode).then(|| {
                let priority = self.scenario.qos.map.pcp_of(pkt.dscp());
                encode::vlan_tci(priority, topo.vlan_of(pkt.src))
            }),
            int: (self.scenario.qos.framing.int_of(pkt.opcode) > 0)
                .then(|| int.copied().unwrap_or_default()),
        };
        let bytes = encode::encode(pkt, &ctx);
        if let Some(kept) = &mut c.recorded {
            let event = (now.0, self.keying.handling);
            c.last = if (c.last.0, c.last.1) == event {
                (event.0, event.1, c.last.2 + 1)
            } else {
                (event.0, event.1, 0)
            };
            // The heartbeat tick is one event for the whole fabric, each
            // partition sending its own helpers' heartbeats: one queue
            // sends them in the order of their links.
            let order = if pkt.opcode == Opcode::Heartbeat {
                (event.0, event.1, pkt.qp.0)
            } else {
                c.last
            };
            match kept.push(order, p, &bytes) {
                Ok(()) => c.frames += 1,
                Err(e) => c.error = Some(e),
            }
            return;
        }
        let result = (|| {
            if c.iface[p.idx()] == u32::MAX {
                c.iface[p.idx()] = c.ifaces;
                c.ifaces += 1;
                let name = topo.link_name(p);
                let speed = topo.port(p).rate.bps();
                c.out.link(&name, speed)?;
            }
            c.out.frame(c.iface[p.idx()], now.0 / 1000, &bytes)
        })();
        match result {
            Ok(()) => c.frames += 1,
            Err(e) => c.error = Some(e),
        }
    }
}

//! Chakra execution traces (MLCommons) as workloads.
//!
//! A trace is a folder with one file per rank, `PREFIX.RANK.et`: a stream
//! of protobuf messages, each after its length as a varint, first a
//! `GlobalMetadata` and then `Node`s. A node runs once its data and
//! control dependencies (nodes of the same rank) are done. Mapping:
//!
//! - `COMP`: its `duration_micros` on the rank's GPU, one kernel at a time
//!   (CPU ops, `is_cpu_op`, take their time off the GPU);
//! - `COMM_COLL`: a collective on the ranks of its process group
//!   (`pg_name`; none, or an undefined "0", is every rank). Groups are
//!   defined by METADATA nodes (PyTorch's `process_group:init`, a JSON
//!   list of `pg_name` and `ranks` in the node's input values) or given
//!   beside the trace (ASTRA-sim's group file). The n-th collective node
//!   of every member of a group together form the group's n-th
//!   collective (`comm_type`, and `comm_size` bytes read as ASTRA-sim
//!   reads them by default: see `CommSizes`), run with the workload's algorithm
//!   settings; each rank takes part once its node's dependencies are
//!   done and its node is done when its own part is (as its NCCL call
//!   returns), a barrier when every member has reached it;
//! - `COMM_SEND` / `COMM_RECV`: a transfer of `comm_size` bytes to rank
//!   `comm_dst`; the receive (matched by source, destination and tag, in
//!   order) is done when the data has arrived, the send when its sender
//!   has every acknowledgement (as an RDMA send completes, and so that
//!   what a rank does next waits only for its own host);
//! - `METADATA`: nothing to do.
//!
//! Memory operations and the collectives this simulator does not have
//! (reduce, gather, scatter) are refused with the node named.
//!
//! Each rank's file is read whole once to check it (its nodes, and its
//! collectives' counts per communicator), then again a window
//! at a time as the run reaches it (`window`); the order the nodes go in
//! the task graph is worked out over those windows (`order`), part by
//! part (`TraceGen`).

use super::collective::{self, Algorithm, Collective, CollectiveRun, Emitter, Op};
use crate::topology::GpuId;
use crate::units::SimTime;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

mod lean;
mod order;
mod window;

/// Protobuf messages of the format, by field number.
mod pb {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GlobalMetadata {
        #[prost(string, tag = "1")]
        pub version: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Node {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(string, tag = "2")]
        pub name: String,
        #[prost(int32, tag = "3")]
        pub r#type: i32,
        #[prost(uint64, repeated, tag = "4")]
        pub ctrl_deps: Vec<u64>,
        #[prost(uint64, repeated, tag = "5")]
        pub data_deps: Vec<u64>,
        #[prost(uint64, tag = "6")]
        pub start_time_micros: u64,
        #[prost(uint64, tag = "7")]
        pub duration_micros: u64,
        #[prost(message, optional, tag = "8")]
        pub inputs: Option<IoInfo>,
        #[prost(message, repeated, tag = "10")]
        pub attr: Vec<Attribute>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct IoInfo {
        #[prost(string, tag = "1")]
        pub values: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Attribute {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(
            oneof = "Value",
            tags = "3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31"
        )]
        pub value: Option<Value>,
    }

    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        #[prost(double, tag = "3")]
        Double(f64),
        #[prost(float, tag = "5")]
        Float(f32),
        #[prost(int32, tag = "7")]
        Int32(i32),
        #[prost(int64, tag = "9")]
        Int64(i64),
        #[prost(uint32, tag = "11")]
        Uint32(u32),
        #[prost(uint64, tag = "13")]
        Uint64(u64),
        #[prost(sint32, tag = "15")]
        Sint32(i32),
        #[prost(sint64, tag = "17")]
        Sint64(i64),
        #[prost(fixed32, tag = "19")]
        Fixed32(u32),
        #[prost(fixed64, tag = "21")]
        Fixed64(u64),
        #[prost(sfixed32, tag = "23")]
        Sfixed32(i32),
        #[prost(sfixed64, tag = "25")]
        Sfixed64(i64),
        #[prost(bool, tag = "27")]
        Bool(bool),
        #[prost(string, tag = "29")]
        String(String),
        #[prost(bytes = "vec", tag = "31")]
        Bytes(Vec<u8>),
    }
}

/// Node types of the format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Metadata,
    MemLoad,
    MemStore,
    Comp,
    Send,
    Recv,
    Coll,
    Invalid,
}

impl Kind {
    fn of(t: i32) -> Kind {
        match t {
            1 => Kind::Metadata,
            2 => Kind::MemLoad,
            3 => Kind::MemStore,
            4 => Kind::Comp,
            5 => Kind::Send,
            6 => Kind::Recv,
            7 => Kind::Coll,
            _ => Kind::Invalid,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::Metadata => "METADATA",
            Kind::MemLoad => "MEM_LOAD",
            Kind::MemStore => "MEM_STORE",
            Kind::Comp => "COMP",
            Kind::Send => "COMM_SEND",
            Kind::Recv => "COMM_RECV",
            Kind::Coll => "COMM_COLL",
            Kind::Invalid => "INVALID",
        }
    }
}

/// What the simulator reads of one node.
#[derive(Clone, Copy, Debug)]
pub struct Node<'a> {
    /// Its place in its rank's file (0 for the first node).
    pub at: u32,
    pub id: u64,
    pub kind: Kind,
    pub cpu: bool,
    pub duration: SimTime,
    /// Its data and control dependencies, as places in its rank.
    pub deps: &'a [u32],
    comm: &'a Comm,
}

impl<'a> Node<'a> {
    pub fn comm(&self) -> &'a Comm {
        self.comm
    }
}

/// What a communication or METADATA node says.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comm {
    pub comm_type: Option<i64>,
    pub comm_size: Option<u64>,
    pub comm_src: Option<i64>,
    pub comm_dst: Option<i64>,
    pub comm_tag: i64,
    /// The process group of a communication node (`pg_name`).
    pub pg_name: Option<String>,
    /// The process groups a METADATA node defines (PyTorch's
    /// `process_group:init`, in its inputs' values): name and ranks.
    pub defines: Vec<(String, Vec<i64>)>,
}

/// A node's fields when it has none.
static NO_COMM: Comm = Comm {
    comm_type: None,
    comm_size: None,
    comm_src: None,
    comm_dst: None,
    comm_tag: 0,
    pg_name: None,
    defines: Vec::new(),
};

/// One rank's nodes in file order, field by field: about 30 bytes a
/// node and no allocation per node. Names are not kept; messages read
/// them back from the file (`Trace::at`).
#[derive(Clone, Debug, Default)]
pub struct Nodes {
    ids: Vec<u64>,
    kinds: Vec<(Kind, bool)>,
    durations: Vec<SimTime>,
    /// Where each node's dependencies begin in `deps`, then the end.
    deps_at: Vec<u32>,
    deps: Vec<u32>,
    /// The nodes with communication fields, by place.
    comms: Vec<(u32, Comm)>,
}

impl Nodes {
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The node at place `i`.
    pub fn node(&self, i: usize) -> Node<'_> {
        let comm = match self.comms.binary_search_by_key(&(i as u32), |c| c.0) {
            Ok(k) => &self.comms[k].1,
            Err(_) => &NO_COMM,
        };
        self.with(i, comm)
    }

    /// The dependencies of the node at place `i`.
    fn deps(&self, i: usize) -> &[u32] {
        &self.deps[self.deps_at[i] as usize..self.deps_at[i + 1] as usize]
    }

    fn with<'a>(&'a self, i: usize, comm: &'a Comm) -> Node<'a> {
        let (kind, cpu) = self.kinds[i];
        Node {
            at: i as u32,
            id: self.ids[i],
            kind,
            cpu,
            duration: self.durations[i],
            deps: &self.deps[self.deps_at[i] as usize..self.deps_at[i + 1] as usize],
            comm,
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = Node<'_>> {
        let mut c = 0;
        (0..self.len()).map(move |i| {
            let comm = match self.comms.get(c) {
                Some((at, comm)) if *at as usize == i => {
                    c += 1;
                    comm
                }
                _ => &NO_COMM,
            };
            self.with(i, comm)
        })
    }

    /// The nodes with communication fields.
    fn comms(&self) -> impl Iterator<Item = Node<'_>> {
        self.comms.iter().map(|(i, c)| self.with(*i as usize, c))
    }
}

/// One rank's nodes as they are read, their dependencies still ids.
#[derive(Default)]
struct Builder {
    nodes: Nodes,
    dep_ids: Vec<u64>,
    index: HashMap<u64, u32>,
}

impl Builder {
    /// Adds the next node; an error if its id is taken.
    pub fn push(
        &mut self,
        id: u64,
        kind: Kind,
        cpu: bool,
        duration: SimTime,
        deps: &[u64],
        comm: Comm,
    ) -> Result<(), String> {
        let n = &mut self.nodes;
        if n.ids.len() >= MAX_NODES {
            return Err(format!("more than {MAX_NODES} nodes in one rank"));
        }
        if self.index.insert(id, n.ids.len() as u32).is_some() {
            return Err("the id is used twice in this rank".into());
        }
        if comm != NO_COMM {
            n.comms.push((n.ids.len() as u32, comm));
        }
        n.ids.push(id);
        n.kinds.push((kind, cpu));
        n.durations.push(duration);
        n.deps_at.push(self.dep_ids.len() as u32);
        self.dep_ids.extend(deps);
        Ok(())
    }

    /// The rank's nodes, each dependency found by its id; else the
    /// place and id of the first node whose dependency is not in the
    /// rank, and that dependency.
    pub fn finish(self) -> Result<Nodes, (usize, u64, u64)> {
        let Builder {
            mut nodes,
            dep_ids,
            index,
        } = self;
        nodes.deps_at.push(dep_ids.len() as u32);
        let mut deps = Vec::with_capacity(dep_ids.len());
        for i in 0..nodes.ids.len() {
            let (a, b) = (nodes.deps_at[i] as usize, nodes.deps_at[i + 1] as usize);
            for &d in &dep_ids[a..b] {
                deps.push(*index.get(&d).ok_or((i, nodes.ids[i], d))?);
            }
        }
        nodes.deps = deps;
        nodes.deps_at.shrink_to_fit();
        nodes.ids.shrink_to_fit();
        nodes.kinds.shrink_to_fit();
        nodes.durations.shrink_to_fit();
        nodes.comms.shrink_to_fit();
        Ok(nodes)
    }
}

/// A trace: where each rank's nodes are read from, and what reading
/// them once found (each rank is held a window at a time, `window`).
#[derive(Clone, Debug)]
pub struct Trace {
    sources: Vec<Arc<window::Source>>,
    surveys: Vec<Arc<window::Survey>>,
    /// The process groups its METADATA nodes define: rank, place and id
    /// of the node, name and ranks.
    defines: Vec<(usize, u32, u64, String, Vec<i64>)>,
    /// Each rank's collectives by process group name.
    tallies: Vec<Tally>,
    /// Its ranks and nodes.
    counts: (usize, usize),
    /// Sends no receive matches, said as a warning (their data moves and
    /// nothing waits for it).
    pub unmatched: Option<String>,
}

/// Per (sender, receiver, tag): sends less receives, and the first node
/// of each (rank, place, id), to name one in a message.
type PointToPoint = HashMap<(usize, usize, i64), (i64, Option<(usize, u32, u64)>)>;

/// Counts a send or a receive of rank `r`.
fn count_p2p(p2p: &mut PointToPoint, r: usize, n: &Node) {
    let c = n.comm();
    let (key, step) = match n.kind {
        Kind::Send => ((r, c.comm_dst.unwrap_or(0) as usize, c.comm_tag), 1),
        Kind::Recv => ((c.comm_src.unwrap_or(0) as usize, r, c.comm_tag), -1),
        _ => return,
    };
    let e = p2p.entry(key).or_insert((0, None));
    e.0 += step;
    // The first node that leaves the count unbalanced on its side.
    if e.1.is_none() || (e.0 == step) {
        e.1 = Some((r, n.at, n.id));
    }
}

/// How many collectives a rank has in one communicator, and a hash of
/// their types and sizes in file order: two ranks that agree on both take
/// part in the same collectives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Sum {
    count: usize,
    hash: u64,
}

impl Sum {
    fn add(&mut self, comm_type: Option<i64>, size: Option<u64>) {
        self.count += 1;
        self.hash = (self.hash.rotate_left(7) ^ comm_type.unwrap_or(-1) as u64)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ size.unwrap_or(0);
    }
}

/// One rank's collectives by the `pg_name` they give, found as the rank
/// is first read, so that the communicators are checked without reading
/// the files again.
#[derive(Clone, Debug, Default)]
struct Tally {
    /// Each name in the order first met: the name, the place and id of
    /// its first collective (for messages), and its sum.
    names: Vec<(String, u32, u64, Sum)>,
    /// The names "" and "0" together: the default communicator's sum
    /// when no group is named "0" (see `group_of`).
    default: Sum,
}

impl Tally {
    fn add(&mut self, n: &Node) {
        let c = n.comm();
        let name = c.pg_name.as_deref().unwrap_or("");
        // A rank's collectives name few communicators: a scan is enough.
        let k = match self.names.iter().position(|x| x.0 == name) {
            Some(k) => k,
            None => {
                self.names
                    .push((name.to_string(), n.at, n.id, Sum::default()));
                self.names.len() - 1
            }
        };
        self.names[k].3.add(c.comm_type, c.comm_size);
        if name.is_empty() || name == "0" {
            self.default.add(c.comm_type, c.comm_size);
        }
    }
}

impl Trace {
    /// Reads each rank's stream whole once: checks every node and finds
    /// what reading it again a `window` at a time needs.
    fn read(sources: Vec<window::Source>, window: usize) -> Result<Trace, String> {
        let ranks = sources.len();
        let mut trace = Trace {
            sources: Vec::with_capacity(ranks),
            surveys: Vec::with_capacity(ranks),
            defines: Vec::new(),
            tallies: Vec::with_capacity(ranks),
            counts: (ranks, 0),
            unmatched: None,
        };
        let mut p2p = PointToPoint::default();
        for (r, source) in sources.into_iter().enumerate() {
            let (nodes, first, bytes) = source
                .stream()
                .and_then(|m| {
                    let left = m.left;
                    decode_from(m, |i| source.name(i)).map(|(n, first)| (n, first, left))
                })
                .map_err(|e| source.whence(e))?;
            trace.sources.push(Arc::new(source));
            let mut tally = Tally::default();
            for n in nodes.iter() {
                trace.check(r, n)?;
                if n.kind == Kind::Coll {
                    tally.add(&n);
                }
                count_p2p(&mut p2p, r, &n);
            }
            for n in nodes.comms() {
                for (name, list) in &n.comm().defines {
                    trace
                        .defines
                        .push((r, n.at, n.id, name.clone(), list.clone()));
                }
            }
            trace.counts.1 += nodes.len();
            let survey = window::Survey::of(&nodes, window, first, bytes);
            trace.surveys.push(Arc::new(survey));
            // Kept by a copy made once the rank's nodes are let go, so that
            // its few strings do not sit between their large blocks and keep
            // the next rank from reusing them.
            drop(nodes);
            trace.tallies.push(tally.clone());
        }
        trace.match_p2p(p2p)?;
        Ok(trace)
    }

    /// Every receive has its send (else the trace cannot run: an error
    /// naming it); sends without their receive are kept as a warning.
    fn match_p2p(&mut self, p2p: PointToPoint) -> Result<(), String> {
        let mut keys: Vec<_> = p2p.into_iter().filter(|(_, v)| v.0 != 0).collect();
        keys.sort_by_key(|(k, _)| *k);
        if let Some(((src, dst, tag), (n, at))) = keys.iter().find(|(_, v)| v.0 < 0) {
            let (r, place, id) = at.expect("a receive was counted");
            return Err(format!(
                "{}: rank {dst} receives from rank {src} (tag {tag}) {} more time(s) than rank {src} sends to it; a receive without its send never runs",
                self.at(r, place, id),
                -n
            ));
        }
        if let Some(((src, dst, tag), (_, at))) = keys.first() {
            let (r, place, id) = at.expect("a send was counted");
            let sends: i64 = keys.iter().map(|(_, v)| v.0).sum();
            self.unmatched = Some(format!(
                "{sends} send(s) have no receive, in {} (sender, receiver, tag) pair(s), the first from rank {src} to rank {dst} (tag {tag}) at {}: their data moves and nothing waits for it",
                keys.len(),
                self.at(r, place, id)
            ));
        }
        Ok(())
    }

    /// A trace of the streams in memory, one per rank (as files hold them).
    pub fn from_bytes(ranks: Vec<Vec<u8>>, window: usize) -> Result<Trace, String> {
        if ranks.is_empty() || ranks.len() > MAX_RANKS {
            return Err(format!(
                "expected 1 to {MAX_RANKS} ranks, got {}",
                ranks.len()
            ));
        }
        let sources = ranks
            .into_iter()
            .map(|b| window::Source::Bytes(b.into()))
            .collect();
        Trace::read(sources, window)
    }

    pub fn rank_count(&self) -> usize {
        self.counts.0
    }

    pub fn node_count(&self) -> usize {
        self.counts.1
    }

    /// The trace without its nodes, keeping their counts: what the
    /// scenario keeps once the trace is with the workload's parts.
    pub fn counts_only(&self) -> Trace {
        Trace {
            sources: Vec::new(),
            surveys: Vec::new(),
            defines: Vec::new(),
            tallies: Vec::new(),
            counts: self.counts,
            unmatched: self.unmatched.clone(),
        }
    }

    /// Where a node is in the trace, for messages: its rank, id and, if
    /// its file can be read again, its name.
    fn at(&self, rank: usize, place: u32, id: u64) -> String {
        let name = self.sources.get(rank).and_then(|s| s.name(place as usize));
        match name {
            Some(name) => format!("rank {rank} node {id} (\"{name}\")"),
            None => format!("rank {rank} node {id}"),
        }
    }

    /// Checks a node on its own (its dependencies are checked as read).
    fn check(&self, r: usize, n: Node) -> Result<(), String> {
        let ranks = self.counts.0;
        let at = || self.at(r, n.at, n.id);
        match n.kind {
            Kind::MemLoad | Kind::MemStore | Kind::Invalid => {
                return Err(format!(
                    "{}: {} nodes are not supported (memory operations are not simulated)",
                    at(),
                    n.kind.name()
                ))
            }
            Kind::Coll => {
                let t = n
                    .comm()
                    .comm_type
                    .ok_or_else(|| format!("{}: a COMM_COLL node without comm_type", at()))?;
                let op = op_of(t).map_err(|what| {
                    format!(
                        "{}: comm_type {t}, {what} collectives, is not supported",
                        at()
                    )
                })?;
                if op.is_some() && n.comm().comm_size.is_none_or(|b| b == 0) {
                    return Err(format!("{}: a collective without comm_size", at()));
                }
            }
            Kind::Send | Kind::Recv => {
                let peer = if n.kind == Kind::Send {
                    n.comm().comm_dst
                } else {
                    n.comm().comm_src
                };
                match peer {
                    Some(p) if p >= 0 && (p as usize) < ranks && p as usize != r => {}
                    _ => {
                        return Err(format!(
                        "{}: expected {} to be another rank of the trace (0 to {}), got {peer:?}",
                        at(),
                        if n.kind == Kind::Send {
                            "comm_dst"
                        } else {
                            "comm_src"
                        },
                        ranks - 1
                    ))
                    }
                }
                if n.kind == Kind::Send && n.comm().comm_size.is_none_or(|b| b == 0) {
                    return Err(format!("{}: a send without comm_size", at()));
                }
            }
            Kind::Comp | Kind::Metadata => {}
        }
        Ok(())
    }

    /// Each rank's collective nodes, in file order, as (place, id,
    /// process group name, type, size), read from its stream again (to
    /// name the node where two ranks' collectives differ).
    fn collectives(
        &self,
        r: usize,
        mut f: impl FnMut(u32, u64, &str, Option<i64>, Option<u64>) -> Result<(), String>,
    ) -> Result<(), String> {
        let source = &self.sources[r];
        let mut m = source.stream()?;
        m.next()?;
        let mut place = 0u32;
        while let Some(msg) = m.next()? {
            let raw = decode_node(msg, place as usize + 1)?;
            if raw.kind == Kind::Coll {
                let c = &raw.comm;
                f(
                    place,
                    raw.id,
                    c.pg_name.as_deref().unwrap_or(""),
                    c.comm_type,
                    c.comm_size,
                )?;
            }
            place += 1;
        }
        Ok(())
    }
}

/// Most ranks and nodes a trace may have (bounds memory on bad input).
const MAX_RANKS: usize = 65_536;
const MAX_NODES: usize = 4 << 20;

fn int_of(v: &pb::Value) -> Option<i64> {
    use pb::Value::*;
    Some(match *v {
        Int32(x) | Sint32(x) | Sfixed32(x) => x as i64,
        Int64(x) | Sint64(x) | Sfixed64(x) => x,
        Uint32(x) | Fixed32(x) => x as i64,
        Uint64(x) | Fixed64(x) => i64::try_from(x).ok()?,
        Bool(b) => b as i64,
        _ => return None,
    })
}

/// The messages of a length-delimited stream of `left` bytes, in order.
struct Messages<R> {
    reader: R,
    left: u64,
    buf: Vec<u8>,
}

impl<R: std::io::Read> Messages<R> {
    fn new(reader: R, left: u64) -> Messages<R> {
        Messages {
            reader,
            left,
            buf: Vec::new(),
        }
    }

    fn byte(&mut self) -> Result<u8, String> {
        let mut b = [0u8];
        if self.left == 0 {
            return Err("bad length prefix: the file ends inside it".into());
        }
        self.reader
            .read_exact(&mut b)
            .map_err(|e| format!("cannot read: {e}"))?;
        self.left -= 1;
        Ok(b[0])
    }

    /// The next message; `None` at the end, an error for a length that
    /// does not fit.
    fn next(&mut self) -> Result<Option<&[u8]>, String> {
        if self.left == 0 {
            return Ok(None);
        }
        let mut len: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            len |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
            if shift == 63 {
                return Err("bad length prefix: longer than 10 bytes".into());
            }
        }
        if len > self.left {
            return Err(format!(
                "a message of {len} bytes runs past the end of the file ({} bytes left)",
                self.left
            ));
        }
        self.buf.resize(len as usize, 0);
        self.reader
            .read_exact(&mut self.buf)
            .map_err(|e| format!("cannot read: {e}"))?;
        self.left -= len;
        Ok(Some(&self.buf))
    }
}

/// The name of the node at place `i` of a rank's stream, if it decodes.
fn name_at<R: std::io::Read>(mut m: Messages<R>, i: usize) -> Option<String> {
    use prost::Message;
    for _ in 0..=i {
        m.next().ok()??;
    }
    pb::Node::decode(m.next().ok()??).ok().map(|n| n.name)
}

fn name_in(buf: &[u8], i: usize) -> Option<String> {
    name_at(Messages::new(buf, buf.len() as u64), i)
}

/// As `name_in`, reading the file a message at a time (for messages
/// about a trace read before).
fn name_in_file(path: &Path, i: usize) -> Option<String> {
    let (file, len) =
        crate::input::open_file(path, crate::input::MAX_TRACE_BYTES, "trace file").ok()?;
    name_at(Messages::new(std::io::BufReader::new(file), len), i)
}

/// Whether, on every node message of a stream, the lean reader refuses
/// or gives what `prost` gives (the fuzz target asks it of every input).
pub fn lean_matches_prost(buf: &[u8]) -> bool {
    let mut m = Messages::new(buf, buf.len() as u64);
    if !matches!(m.next(), Ok(Some(_))) {
        return true;
    }
    let mut count = 0;
    while let Ok(Some(msg)) = m.next() {
        count += 1;
        if let Some(got) = lean::node(msg) {
            if decode_node(msg, count).ok().as_ref() != Some(&got) {
                return false;
            }
        }
    }
    true
}

/// Decodes a length-delimited stream held in memory: metadata, then
/// nodes.
pub fn decode(buf: &[u8]) -> Result<Nodes, String> {
    decode_from(Messages::new(buf, buf.len() as u64), |i| name_in(buf, i)).map(|d| d.0)
}

/// A node as decoded, its dependencies still ids.
#[derive(Debug, PartialEq)]
struct Raw {
    id: u64,
    kind: Kind,
    cpu: bool,
    duration: SimTime,
    deps: Vec<u64>,
    comm: Comm,
}

/// The `count`-th node message of a stream: by the lean reader, and by
/// `prost` where it refuses (for the error, or for a node it leaves to
/// `prost`, say with groups nested past its depth).
fn decode_node_fast(msg: &[u8], count: usize) -> Result<Raw, String> {
    lean::node(msg).map_or_else(|| decode_node(msg, count), Ok)
}

/// Longest a node may run: simulated time is picoseconds in 64 bits, and
/// a run's nodes together must stay well inside that.
pub const MAX_DURATION_US: u64 = 1 << 40;

/// Decodes the `count`-th node message of a stream.
fn decode_node(msg: &[u8], count: usize) -> Result<Raw, String> {
    use prost::Message;
    let n = pb::Node::decode(msg).map_err(|e| format!("bad Node (message {count}): {e}"))?;
    let attr = |name: &str| {
        n.attr
            .iter()
            .find(|a| a.name == name)
            .and_then(|a| a.value.as_ref())
    };
    let int = |name: &str| attr(name).and_then(int_of);
    let pg_name = attr("pg_name").map(|v| match v {
        pb::Value::String(s) => s.clone(),
        other => int_of(other).map_or_else(String::new, |i| i.to_string()),
    });
    let kind = Kind::of(n.r#type);
    let whence = || format!("node {} (\"{}\"), message {count}", n.id, n.name);
    let defines = match (&n.inputs, kind) {
        (Some(io), Kind::Metadata) => {
            process_groups(&io.values).map_err(|e| format!("{}: {e}", whence()))?
        }
        _ => Vec::new(),
    };
    let mut deps = n.data_deps.clone();
    deps.extend(&n.ctrl_deps);
    let comm = Comm {
        comm_type: int("comm_type"),
        comm_size: int("comm_size").and_then(|s| u64::try_from(s).ok()),
        comm_src: int("comm_src"),
        comm_dst: int("comm_dst"),
        comm_tag: int("comm_tag").unwrap_or(0),
        pg_name,
        defines,
    };
    if n.duration_micros > MAX_DURATION_US {
        return Err(format!(
            "node {} (message {count}) runs {} us, more than the {MAX_DURATION_US} us (about 12.7 days) a node may take",
            n.id, n.duration_micros
        ));
    }
    Ok(Raw {
        id: n.id,
        kind,
        cpu: int("is_cpu_op").unwrap_or(0) != 0,
        duration: SimTime::from_us(n.duration_micros),
        deps,
        comm,
    })
}

/// Decodes a stream of metadata, then nodes; `names` finds a node's
/// name by its place, for messages. Also gives where the first node's
/// message begins.
fn decode_from<R: std::io::Read>(
    mut messages: Messages<R>,
    names: impl Fn(usize) -> Option<String>,
) -> Result<(Nodes, u64), String> {
    use prost::Message;
    let total = messages.left;
    let mut b = Builder::default();
    let Some(msg) = messages.next()? else {
        return Err("empty file (no GlobalMetadata)".into());
    };
    pb::GlobalMetadata::decode(msg).map_err(|e| format!("bad GlobalMetadata: {e}"))?;
    let first = total - messages.left;
    let mut count = 0;
    while let Some(msg) = messages.next()? {
        count += 1;
        let n = decode_node_fast(msg, count)?;
        b.push(n.id, n.kind, n.cpu, n.duration, &n.deps, n.comm)
            .map_err(|e| {
                format!(
                    "node {} (\"{}\"), message {count}: {e}",
                    n.id,
                    names(count - 1).unwrap_or_default()
                )
            })?;
    }
    let nodes = b.finish().map_err(|(i, id, d)| {
        let name = names(i).unwrap_or_default();
        format!(
            "node {id} (\"{name}\"), message {}: depends on node {d}, which this rank does not have",
            i + 1
        )
    })?;
    Ok((nodes, first))
}

/// The process groups in a METADATA node's input values, as PyTorch's
/// execution trace records them: a JSON list of objects with `pg_name`
/// and `ranks` (empty: every rank), possibly as the one string of a
/// list. Values that are not such a list define nothing.
fn process_groups(values: &str) -> Result<Vec<(String, Vec<i64>)>, String> {
    use serde_json::Value;
    let Ok(mut v) = serde_json::from_str::<Value>(values) else {
        return Ok(Vec::new());
    };
    if let Some(Value::String(inner)) = v.as_array().and_then(|a| a.first()) {
        match serde_json::from_str::<Value>(inner) {
            Ok(x) => v = x,
            Err(_) => return Ok(Vec::new()),
        }
    }
    let Some(items) = v.as_array() else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for item in items {
        let Some(name) = item.get("pg_name") else {
            continue;
        };
        let name = match name {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => {
                return Err(format!(
                    "a process group's pg_name is {name}, expected a string"
                ))
            }
        };
        let ranks = item
            .get("ranks")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().map(Value::as_i64).collect::<Option<Vec<i64>>>())
            .ok_or_else(|| format!("process group \"{name}\" has no list of integer ranks"))?;
        out.push((name, ranks));
    }
    Ok(out)
}

/// Reads a trace folder: files `PREFIX.RANK.et` for ranks 0 to n-1,
/// each read whole once to check it, then a `window` at a time.
pub fn read_dir(dir: &Path, window: usize) -> Result<Trace, String> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read the trace folder {}: {e}", dir.display()))?;
    let mut files: Vec<(usize, std::path::PathBuf)> = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let Some(stem) = name.strip_suffix(".et") else {
            continue;
        };
        let rank = stem
            .rsplit('.')
            .next()
            .and_then(|r| r.parse::<usize>().ok());
        match rank {
            Some(r) if r < MAX_RANKS => files.push((r, path)),
            _ => {
                return Err(format!(
                    "{}: expected trace files named PREFIX.RANK.et, got {name}",
                    dir.display()
                ))
            }
        }
    }
    if files.is_empty() {
        return Err(format!("{}: no .et trace files", dir.display()));
    }
    files.sort();
    // One trace's files share a prefix: two traces in one folder would
    // otherwise run as one, rank by rank.
    let prefix = |p: &std::path::Path| {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        name.rsplitn(3, '.').nth(2).unwrap_or("").to_string()
    };
    let first = prefix(&files[0].1);
    if let Some((_, other)) = files.iter().find(|(_, p)| prefix(p) != first) {
        return Err(format!(
            "{}: holds the files of more than one trace ({first}.0.et and {}); give each trace a folder of its own",
            dir.display(),
            other.file_name().and_then(|n| n.to_str()).unwrap_or("")
        ));
    }
    for (i, (r, p)) in files.iter().enumerate() {
        if *r != i {
            return Err(format!(
                "{}: ranks must be numbered 0 to {} without gaps or repeats; found {} for rank {i}",
                dir.display(),
                files.len() - 1,
                p.display()
            ));
        }
    }
    let sources = files
        .into_iter()
        .map(|(_, p)| window::Source::File(p))
        .collect();
    Trace::read(sources, window)
}

/// How a trace's collectives run.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Rank r runs on `gpus[r]`.
    pub gpus: Vec<GpuId>,
    /// Algorithm for all-reduce (others use their usual one).
    pub algorithm: Option<Algorithm>,
    pub channels: u32,
    pub chunk: u64,
    pub pxn: bool,
    pub protocol: collective::Protocol,
    /// What the scenario left to NCCL's tuner.
    pub auto: collective::Auto,
    /// Process groups given beside the trace (ASTRA-sim's communicator
    /// group file): name and ranks, in communicator order.
    pub groups: Vec<(String, Vec<i64>)>,
    /// What an all-gather's and a reduce-scatter's `comm_size` counts.
    pub sizes: CommSizes,
    /// How far the order looks ahead in each rank's file, in nodes (see
    /// `order`).
    pub window: usize,
}

/// A communicator of the trace: its name and ranks, in its rank order.
#[derive(Debug)]
struct Group {
    name: String,
    ranks: Vec<usize>,
    /// Its ranks sorted, to find a rank's place.
    sorted: Vec<(usize, usize)>,
}

impl Group {
    fn new(name: String, ranks: Vec<usize>) -> Group {
        let mut sorted: Vec<(usize, usize)> =
            ranks.iter().enumerate().map(|(i, &r)| (r, i)).collect();
        sorted.sort_unstable();
        Group {
            name,
            ranks,
            sorted,
        }
    }

    /// Rank `r`'s place in the group.
    fn place(&self, r: usize) -> Option<usize> {
        self.sorted
            .binary_search_by_key(&r, |&(x, _)| x)
            .ok()
            .map(|i| self.sorted[i].1)
    }
}

/// The trace's communicators: first every rank (the default group,
/// `pg_name` empty or an undefined "0"), then the groups given beside
/// the trace and those its METADATA nodes define, by name.
fn communicators(trace: &Trace, s: &Settings) -> Result<Vec<Group>, String> {
    let ranks = trace.rank_count();
    let mut groups = vec![Group::new(String::new(), (0..ranks).collect())];
    let given = s.groups.iter().map(|(n, r)| (n, r, None));
    let defined = trace
        .defines
        .iter()
        .map(|(r, at, id, g, x)| (g, x, Some((*r, *at, *id))));
    for (name, list, node) in given.chain(defined) {
        let whence = || match node {
            Some((r, at, id)) => trace.at(r, at, id),
            None => "the groups file".to_string(),
        };
        let members: Vec<usize> = if list.is_empty() {
            (0..ranks).collect()
        } else {
            let mut m = Vec::with_capacity(list.len());
            for &x in list {
                match usize::try_from(x) {
                    Ok(x) if x < ranks => m.push(x),
                    _ => {
                        return Err(format!(
                        "{}: process group \"{name}\" names rank {x}; the trace has ranks 0 to {}",
                        whence(),
                        ranks - 1
                    ))
                    }
                }
            }
            m
        };
        let g = Group::new(name.clone(), members);
        if g.sorted.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(format!(
                "{}: process group \"{name}\" names a rank twice",
                whence()
            ));
        }
        match groups.iter().skip(1).find(|x| x.name == *name) {
            Some(old) if old.ranks != g.ranks => {
                return Err(format!(
                    "{}: process group \"{name}\" is defined twice, with ranks {:?} and {:?}",
                    whence(),
                    old.ranks,
                    g.ranks
                ))
            }
            Some(_) => {}
            None => groups.push(g),
        }
    }
    Ok(groups)
}

/// The communicator a node's `pg_name` names (`whence`: the node, for
/// messages).
fn group_of(groups: &[Group], name: &str, whence: impl Fn() -> String) -> Result<usize, String> {
    if name.is_empty() {
        return Ok(0);
    }
    match groups.iter().skip(1).position(|g| g.name == name) {
        Some(i) => Ok(i + 1),
        None if name == "0" => Ok(0),
        None => Err(format!(
            "{}: pg_name \"{name}\" is not a process group of the trace (defined: {}); define it in a METADATA node of the trace or in `groups`, a JSON file of group name to ranks",
            whence(),
            groups
                .iter()
                .skip(1)
                .map(|g| format!("\"{}\"", g.name))
                .reduce(|a, b| a + ", " + &b)
                .unwrap_or_else(|| "none".into())
        )),
    }
}

fn op_of(comm_type: i64) -> Result<Option<Op>, &'static str> {
    Ok(Some(match comm_type {
        0 => Op::AllReduce,
        2 => Op::AllGather,
        5 => Op::Broadcast,
        6 => Op::AllToAll,
        7 | 8 => Op::ReduceScatter,
        9 => return Ok(None),
        1 => return Err("REDUCE"),
        3 => return Err("GATHER"),
        4 => return Err("SCATTER"),
        _ => return Err("unknown (comm_type past 9)"),
    }))
}

/// Adds the whole trace to the graph, not before `start`, in one go.
/// Returns its collectives.
pub fn emit(
    e: &mut Emitter,
    trace: Arc<Trace>,
    s: &Settings,
    start: SimTime,
) -> Result<Vec<CollectiveRun>, String> {
    let mut g = TraceGen::new(trace, s, start)?;
    let mut runs = Vec::new();
    while !g.finished() {
        runs.extend(g.part(e)?);
    }
    Ok(runs)
}

/// How much of the schedule a part of a trace holds: its nodes, a
/// collective counting once per member. A part of this size holds a few
/// megabytes of tasks; memory holds the parts under way (`runtime::later`).
pub const PART_NODES: usize = 16_384;

/// A trace put in the graph part by part, each a stretch of its order
/// (`order`), in order: the first with the other workloads, the rest
/// as the run reaches them (`workload::jobs`), or all before the run.
/// The order, and so every number, is the same either way.
#[derive(Clone, Debug)]
pub struct TraceGen {
    trace: Arc<Trace>,
    settings: Arc<Settings>,
    groups: Arc<[Group]>,
    /// The ranks' windows and the order, worked out as the parts are
    /// made: from the first part on, let go once the last is made.
    making: Option<Box<(window::Windows, order::Order)>>,
    /// Sends made and not yet received, by (sender, receiver, tag): the
    /// task and the bytes.
    sends: HashMap<(usize, usize, i64), std::collections::VecDeque<(u32, u64)>>,
    /// The task every node without dependencies waits for.
    begin: u32,
    start: SimTime,
    /// The next part to make, and whether it was the last.
    made: u32,
    done: bool,
}

/// How much of a part a step takes: a collective counts once per member.
fn weight(groups: &[Group], step: Step) -> usize {
    match step {
        Step::Node(..) => 1,
        Step::Collective(gi) => groups[gi as usize].ranks.len(),
    }
}

/// How far ahead in each rank's file the order looks unless the
/// scenario says (`window`), as ASTRA-sim's feeder reads 4,096 nodes
/// of a file at a time.
pub const WINDOW: usize = 4096;

impl TraceGen {
    /// Checks `trace`'s communicators. The order is worked out as the
    /// parts are made: a node that can never go in is the error of the
    /// part that reaches it (all are made or laid out before the run).
    pub fn new(trace: Arc<Trace>, s: &Settings, start: SimTime) -> Result<TraceGen, String> {
        let ranks = trace.rank_count();
        if s.gpus.len() < ranks {
            return Err(format!(
                "the trace has {ranks} ranks but only {} GPUs are given for them",
                s.gpus.len()
            ));
        }
        let groups: Arc<[Group]> = communicators(&trace, s)?.into();
        check_collectives(&trace, &groups)?;
        Ok(TraceGen {
            making: None,
            groups,
            trace,
            settings: Arc::new(s.clone()),
            sends: HashMap::new(),
            begin: 0,
            start,
            made: 0,
            done: false,
        })
    }

    /// The ranks' windows and the order at its start.
    fn begin(
        trace: &Trace,
        groups: Arc<[Group]>,
        window: usize,
    ) -> Result<(window::Windows, order::Order), String> {
        let mut w = window::Windows::new(&trace.sources, &trace.surveys, groups);
        let o = order::Order::new(&mut w, window)?;
        Ok((w, o))
    }

    /// The parts made so far (all of them once `finished`).
    pub fn made(&self) -> u32 {
        self.made
    }

    pub fn finished(&self) -> bool {
        self.done
    }

    /// Adds the next part to the graph (the first also adds the task that
    /// starts the trace). Returns its collectives.
    pub fn part(&mut self, e: &mut Emitter) -> Result<Vec<CollectiveRun>, String> {
        if self.done {
            return Err("every part of the trace is made".into());
        }
        let s = Arc::clone(&self.settings);
        if self.made == 0 {
            self.begin = e.join(&[], self.start);
            let (w, o) = TraceGen::begin(&self.trace, Arc::clone(&self.groups), s.window)?;
            self.making = Some(Box::new((w, o)));
        }
        let (w, order) = &mut **self.making.as_mut().expect("made at the first part");
        let (sends, begin) = (&mut self.sends, self.begin);
        let groups = Arc::clone(&self.groups);
        let mut runs = Vec::new();
        let mut weighed = 0;
        let mut places: Vec<u32> = Vec::new();
        loop {
            // A part ends at its weight, unless every node is in.
            if weighed >= PART_NODES && !order.all_in() {
                break;
            }
            let step = match order.next(w) {
                Ok(Some(step)) => step,
                Ok(None) => {
                    self.done = true;
                    break;
                }
                Err(order::Stop::Read(m)) => return Err(m),
                Err(order::Stop::Stuck(r, i)) => {
                    let lookahead = if s.window < self.trace.surveys[r].len {
                        format!(", or a rank that must look further ahead in its file than its window of {} nodes, the workload's `window`", s.window)
                    } else {
                        String::new()
                    };
                    return Err(format!(
                        "{}: can never run (a dependency cycle, a receive without its send, or ranks that take a group's collectives in a different order{lookahead})",
                        self.trace.at(r, i as u32, w.node_id(r, i))
                    ));
                }
            };
            weighed += weight(&groups, step);
            // The tasks node i of rank r waits for.
            let mut done = |w: &mut window::Windows, r: usize, i: usize| -> Vec<u32> {
                places.clear();
                places.extend_from_slice(order::Ranks::deps(w, r, i));
                if places.is_empty() {
                    return vec![begin];
                }
                places
                    .iter()
                    .map(|&d| {
                        let t = w.task(r, d as usize, i);
                        debug_assert!(
                            t != NOT_MADE,
                            "the order puts a node after its dependencies"
                        );
                        t
                    })
                    .collect()
            };
            match step {
                Step::Node(r, i) => {
                    let (r, i) = (r as usize, i as usize);
                    let deps = done(w, r, i);
                    let n = order::Ranks::node(w, r, i);
                    let c = n.comm();
                    let t = match n.kind {
                        Kind::Comp if n.cpu => e.delay(n.duration, None, &deps),
                        Kind::Comp => {
                            let lane = e.graph.gpu_lane(s.gpus[r]);
                            e.delay(n.duration, Some(lane), &deps)
                        }
                        Kind::Send => {
                            let dst = c.comm_dst.unwrap_or(0) as usize;
                            let bytes = c.comm_size.unwrap_or(0);
                            let tag = c.comm_tag;
                            // The receive waits for the data; the sender
                            // goes on once it has every acknowledgement,
                            // as its send completes on an RDMA NIC.
                            let t = e.send(s.gpus[r], s.gpus[dst], bytes, 0, &deps)?;
                            sends
                                .entry((r, dst, tag))
                                .or_default()
                                .push_back((t, bytes));
                            e.acked(t)
                        }
                        Kind::Recv => {
                            let src = c.comm_src.unwrap_or(0) as usize;
                            let (send, sent) = sends
                                .get_mut(&(src, r, c.comm_tag))
                                .and_then(|q| q.pop_front())
                                .expect("the order puts a receive after its send");
                            // A receive of another size than its send is
                            // a broken trace: which size moves is unsaid.
                            if let Some(want) = c.comm_size.filter(|&b| b != 0 && b != sent) {
                                return Err(format!(
                                    "{}: receives {want} B from rank {src} (tag {}), whose matching send sends {sent} B",
                                    self.trace.at(r, i as u32, w.node_id(r, i)),
                                    c.comm_tag
                                ));
                            }
                            let mut d = deps;
                            d.push(send);
                            e.join(&d, SimTime::ZERO)
                        }
                        _ => e.join(&deps, SimTime::ZERO),
                    };
                    w.set_task(r, i, t);
                }
                Step::Collective(gi) => {
                    let g = &groups[gi as usize];
                    let members: Vec<u32> = order.members().to_vec();
                    let ready: Vec<Vec<u32>> = g
                        .ranks
                        .iter()
                        .zip(&members)
                        .map(|(&r, &i)| done(w, r, i as usize))
                        .collect();
                    let r0 = g.ranks[0];
                    let first = order::Ranks::node(w, r0, members[0] as usize);
                    let (id, comm) = (first.id, first.comm().clone());
                    let op = op_of(comm.comm_type.unwrap_or(0)).ok().flatten();
                    // Each member takes part once its own node's
                    // dependencies are done, and its node is done when its
                    // own part is, as a rank's NCCL call is; a barrier
                    // waits for every member.
                    let ends: Vec<u32> = match op {
                        Some(op) if g.ranks.len() > 1 => {
                            let c = collective_of(&s, g, &comm, op);
                            let entry: Vec<u32> =
                                ready.iter().map(|d| e.join(d, SimTime::ZERO)).collect();
                            let (run, ends) = collective::emit_per_rank(e, &c, &entry)
                                .map_err(|m| format!("rank {r0} node {id}: {m}"))?;
                            runs.push(run);
                            ends
                        }
                        // A barrier, or a group of one: nothing moves.
                        _ => {
                            let all: Vec<u32> = ready.into_iter().flatten().collect();
                            vec![e.join(&all, SimTime::ZERO); g.ranks.len()]
                        }
                    };
                    for ((&r, &i), t) in g.ranks.iter().zip(&members).zip(ends) {
                        w.set_task(r, i as usize, t);
                    }
                }
            }
        }
        for r in 0..self.trace.rank_count() {
            w.trim(r, order.lo(r));
        }
        self.made += 1;
        if self.finished() {
            // Nothing more is made from it.
            self.making = None;
            self.sends = HashMap::new();
        }
        Ok(runs)
    }
}

/// What a collective node's `comm_size` counts, for the collectives
/// whose buffers differ in size from rank to result. A collective here
/// is sized as nccl-tests counts it (an all-gather by its gathered
/// output, a reduce-scatter by its input before the scatter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommSizes {
    /// As ASTRA-sim's collectives read it (`Ring.cc` and
    /// `HalvingDoubling.cc`: an all-gather of size d ends with d times
    /// the ranks, a reduce-scatter of size d with d over the ranks): an
    /// all-gather's `comm_size` is one rank's share, a reduce-scatter's
    /// its whole input. The default, so that ASTRA-sim's traces move the
    /// bytes ASTRA-sim moves.
    AstraSim,
    /// Both the whole buffer, as nccl-tests counts them.
    Buffer,
    /// Both one rank's share.
    Shard,
}

/// The collective a communicator's collective node runs.
fn collective_of(s: &Settings, g: &Group, first: &Comm, op: Op) -> Collective {
    let mut bytes = first.comm_size.unwrap_or(0);
    let share = match op {
        Op::AllGather => s.sizes != CommSizes::Buffer,
        Op::ReduceScatter => s.sizes == CommSizes::Shard,
        _ => false,
    };
    if share {
        bytes = bytes.saturating_mul(g.ranks.len() as u64);
    }
    Collective {
        op,
        algorithm: match s.algorithm {
            Some(a) if Algorithm::for_op(op).contains(&a) => a,
            _ => Algorithm::for_op(op)[0],
        },
        gpus: g.ranks.iter().map(|&r| s.gpus[r]).collect(),
        bytes,
        channels: s.channels,
        chunk: s.chunk,
        pxn: s.pxn,
        root: 0,
        across: Algorithm::Ring,
        protocol: s.protocol,
        auto: s.auto,
    }
}

/// Checks that every member of each communicator takes part in each of
/// its collectives, with the same type and size: each rank's collective
/// nodes, per communicator, as counted and hashed when the trace was read
/// (`Tally`); where two ranks' hashes differ, both are read again to name
/// the node.
fn check_collectives(trace: &Trace, groups: &[Group]) -> Result<(), String> {
    let ranks = trace.rank_count();
    // Per rank and communicator: its collectives' sum. Where "0" names no
    // group, it is the default communicator, as "" is.
    let zero_is_default = group_of(groups, "0", String::new).is_ok_and(|g| g == 0);
    let mut seen: Vec<HashMap<usize, Sum>> = vec![HashMap::new(); ranks];
    for (r, seen) in seen.iter_mut().enumerate() {
        // Names in the order first met, so that the first node in file
        // order that names no group, or a group without this rank, is the
        // one the error names.
        let tally = &trace.tallies[r];
        for (name, at, id, sum) in &tally.names {
            let gi = group_of(groups, name, || trace.at(r, *at, *id))?;
            if groups[gi].place(r).is_none() {
                return Err(format!(
                    "{}: rank {r} is not in its process group \"{}\" (ranks {:?})",
                    trace.at(r, *at, *id),
                    groups[gi].name,
                    groups[gi].ranks
                ));
            }
            let sum = match gi {
                0 if zero_is_default => tally.default,
                _ => *sum,
            };
            seen.insert(gi, sum);
        }
    }
    // One communicator's collectives of rank r, in order: place, id,
    // type and size.
    type Coll = (u32, u64, Option<i64>, Option<u64>);
    let list = |r: usize, gi: usize| -> Result<Vec<Coll>, String> {
        let mut v = Vec::new();
        trace.collectives(r, |at, id, name, t, b| {
            if group_of(groups, name, String::new)? == gi {
                v.push((at, id, t, b));
            }
            Ok(())
        })?;
        Ok(v)
    };
    for (gi, g) in groups.iter().enumerate() {
        let of = |r: usize| {
            let s = seen[r].get(&gi).copied().unwrap_or_default();
            (s.count, s.hash)
        };
        let (count, hash) = of(g.ranks[0]);
        let name = if g.name.is_empty() {
            "of every rank"
        } else {
            &g.name
        };
        for &r in &g.ranks[1..] {
            let (n, h) = of(r);
            if n != count {
                return Err(format!(
                    "rank {} has {count} collective nodes in process group \"{name}\" but rank {r} has {n}; every rank of a group must take part in each of its collectives",
                    g.ranks[0],
                ));
            }
            if h == hash {
                continue;
            }
            let (a, b) = (list(g.ranks[0], gi)?, list(r, gi)?);
            for (k, (x, y)) in a.iter().zip(&b).enumerate() {
                if (x.2, x.3) != (y.2, y.3) {
                    let shown = |t: Option<i64>, b: Option<u64>| {
                        format!(
                            "comm_type {} of {} B",
                            t.map_or("(none)".into(), |t| t.to_string()),
                            b.map_or("(no comm_size)".into(), |b| b.to_string())
                        )
                    };
                    return Err(format!(
                        "{}: collective {k} of rank {} in its group is {}, this one {}",
                        trace.at(r, y.0, y.1),
                        g.ranks[0],
                        shown(x.2, x.3),
                        shown(y.2, y.3)
                    ));
                }
            }
        }
    }
    Ok(())
}

/// One step of putting a trace in the graph: a rank's node, or a
/// communicator's next collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Rank (below `MAX_RANKS`) and place: 8 bytes a step.
    Node(u16, u32),
    Collective(u32),
}

const _: () = assert!(std::mem::size_of::<Step>() == 8);

/// What `TraceGen::task` holds for a node not made yet (no graph has
/// this many tasks).
const NOT_MADE: u32 = u32::MAX;

#[cfg(test)]
mod tests {
    use super::*;
    use rand_pcg::rand_core::RngCore;

    /// The order by passes as written first: every pass visits every node
    /// of every rank in file order, up to `window` from the rank's first
    /// node not yet in, then the communicators' collectives. `Order`
    /// must give exactly this order, without the passes.
    fn by_passes(
        nodes: &[Nodes],
        groups: &[Group],
        inst: &[Vec<Vec<usize>>],
        window: usize,
    ) -> Result<Vec<Step>, (usize, usize)> {
        let mut placed: Vec<Vec<bool>> = nodes.iter().map(|n| vec![false; n.len()]).collect();
        let total: usize = nodes.iter().map(|n| n.len()).sum();
        let (mut order, mut emitted) = (Vec::new(), 0);
        let mut sent: HashMap<(usize, usize, i64), usize> = HashMap::new();
        let mut next = vec![0usize; groups.len()];
        let ready = |placed: &[Vec<bool>], r: usize, i: usize| {
            let lo = placed[r].iter().position(|p| !p).unwrap_or(placed[r].len());
            i < lo.saturating_add(window)
                && nodes[r].node(i).deps.iter().all(|&d| placed[r][d as usize])
        };
        loop {
            let mut progress = false;
            for (r, nodes) in nodes.iter().enumerate() {
                for (i, n) in nodes.iter().enumerate() {
                    if placed[r][i] || n.kind == Kind::Coll || !ready(&placed, r, i) {
                        continue;
                    }
                    if n.kind == Kind::Recv {
                        let key = (n.comm().comm_src.unwrap() as usize, r, n.comm().comm_tag);
                        match sent.get_mut(&key) {
                            Some(c) if *c > 0 => *c -= 1,
                            _ => continue,
                        }
                    }
                    if n.kind == Kind::Send {
                        *sent
                            .entry((r, n.comm().comm_dst.unwrap() as usize, n.comm().comm_tag))
                            .or_default() += 1;
                    }
                    placed[r][i] = true;
                    order.push(Step::Node(r as u16, i as u32));
                    emitted += 1;
                    progress = true;
                }
            }
            for (gi, g) in groups.iter().enumerate() {
                while next[gi] < inst[gi][0].len()
                    && g.ranks
                        .iter()
                        .zip(&inst[gi])
                        .all(|(&r, m)| ready(&placed, r, m[next[gi]]))
                {
                    for (&r, m) in g.ranks.iter().zip(&inst[gi]) {
                        placed[r][m[next[gi]]] = true;
                        emitted += 1;
                    }
                    order.push(Step::Collective(gi as u32));
                    next[gi] += 1;
                    progress = true;
                }
            }
            if emitted == total {
                return Ok(order);
            }
            if !progress {
                let r = (0..placed.len())
                    .find(|&r| placed[r].contains(&false))
                    .unwrap();
                return Err((r, placed[r].iter().position(|p| !p).unwrap()));
            }
        }
    }

    /// A node as the random trace makes it: id, kind, dependencies' ids
    /// and fields.
    type Raw = (u64, Kind, Vec<u64>, Comm);

    fn node(id: u64, kind: Kind, deps: Vec<u64>, comm: Comm) -> Raw {
        (id, kind, deps, comm)
    }

    /// A random trace of four ranks: compute on and off each rank's
    /// chain, extra dependencies, sends and receives on three tags,
    /// collectives on all ranks and on two groups; each rank's nodes in
    /// shuffled file order (collectives kept in their order): for odd
    /// seeds, each node moved at most a few places. Some have a receive
    /// with no send, or a cycle. Each rank's file, as bytes.
    type Files = Vec<Vec<u8>>;
    fn random_trace(seed: u64) -> (Files, Vec<(String, Vec<i64>)>) {
        let mut rng = rand_pcg::Pcg64Mcg::new(u128::from(seed) << 64 | 0x5eed);
        let mut pick = |n: u64| rng.next_u64() % n;
        const R: usize = 4;
        let groups = vec![("a".to_string(), vec![0, 2]), ("b".to_string(), vec![1, 3])];
        let mut ranks: Vec<Vec<Raw>> = vec![Vec::new(); R];
        let mut last: Vec<Option<u64>> = vec![None; R];
        let mut add =
            |ranks: &mut Vec<Vec<Raw>>, r: usize, kind: Kind, comm: Comm, chain: bool, x: u64| {
                let id = ranks[r].len() as u64;
                let mut deps = Vec::new();
                if chain {
                    deps.extend(last[r]);
                    last[r] = Some(id);
                }
                if id > 0 && x.is_multiple_of(2) {
                    deps.push(x / 2 % id);
                }
                ranks[r].push(node(id, kind, deps, comm));
            };
        let coll = |pg: Option<&str>| Comm {
            comm_type: Some(0),
            comm_size: Some(1 << 16),
            pg_name: pg.map(str::to_string),
            ..Comm::default()
        };
        for _ in 0..40 + pick(40) {
            let r = pick(R as u64) as usize;
            let x = pick(1 << 20);
            match pick(8) {
                0..=2 => add(&mut ranks, r, Kind::Comp, Comm::default(), pick(3) > 0, x),
                3..=4 => {
                    let d = (r + 1 + pick(R as u64 - 1) as usize) % R;
                    let tag = pick(3) as i64;
                    let send = Comm {
                        comm_dst: Some(d as i64),
                        comm_size: Some(4096),
                        comm_tag: tag,
                        ..Comm::default()
                    };
                    add(&mut ranks, r, Kind::Send, send, true, x);
                    if pick(20) > 0 {
                        let recv = Comm {
                            comm_src: Some(r as i64),
                            comm_tag: tag,
                            ..Comm::default()
                        };
                        add(&mut ranks, d, Kind::Recv, recv, true, pick(1 << 20));
                    }
                }
                5..=6 => {
                    let g = &groups[pick(2) as usize];
                    for &m in &g.1 {
                        add(
                            &mut ranks,
                            m as usize,
                            Kind::Coll,
                            coll(Some(&g.0)),
                            true,
                            pick(1 << 20),
                        );
                    }
                }
                _ => {
                    for m in 0..R {
                        add(&mut ranks, m, Kind::Coll, coll(None), true, pick(1 << 20));
                    }
                }
            }
        }
        if pick(10) == 0 {
            // A cycle: a node waits for one after it on its chain.
            let r = pick(R as u64) as usize;
            let n = ranks[r].len() as u64;
            if n > 2 {
                let i = pick(n - 1) as usize;
                ranks[r][i].2.push(n - 1);
            }
        }
        for nodes in &mut ranks {
            // Shuffle, then put the collectives back in their order.
            for i in (1..nodes.len()).rev() {
                let j = if seed.is_multiple_of(2) {
                    pick(i as u64 + 1) as usize
                } else {
                    i - pick(i.min(3) as u64 + 1) as usize
                };
                nodes.swap(i, j);
            }
            let slots: Vec<usize> = (0..nodes.len())
                .filter(|&i| nodes[i].1 == Kind::Coll)
                .collect();
            let mut colls: Vec<Raw> = slots.iter().map(|&i| nodes[i].clone()).collect();
            colls.sort_by_key(|n| n.0);
            for (i, c) in slots.into_iter().zip(colls) {
                nodes[i] = c;
            }
        }
        (ranks.iter().map(|n| encode(n)).collect(), groups)
    }

    /// A rank's file of these nodes (each taking 1 us).
    fn encode(nodes: &[Raw]) -> Vec<u8> {
        use prost::Message;
        let mut out = Vec::new();
        pb::GlobalMetadata {
            version: "0.0.4".into(),
        }
        .encode_length_delimited(&mut out)
        .unwrap();
        for (id, kind, deps, comm) in nodes {
            let int = |name: &str, v: Option<i64>| {
                v.map(|v| pb::Attribute {
                    name: name.into(),
                    value: Some(pb::Value::Int64(v)),
                })
            };
            let mut attr: Vec<pb::Attribute> = [
                int("comm_type", comm.comm_type),
                int("comm_size", comm.comm_size.map(|b| b as i64)),
                int("comm_src", comm.comm_src),
                int("comm_dst", comm.comm_dst),
                int("comm_tag", Some(comm.comm_tag).filter(|&t| t != 0)),
            ]
            .into_iter()
            .flatten()
            .collect();
            if let Some(pg) = &comm.pg_name {
                attr.push(pb::Attribute {
                    name: "pg_name".into(),
                    value: Some(pb::Value::String(pg.clone())),
                });
            }
            let code = match kind {
                Kind::Comp => 4,
                Kind::Send => 5,
                Kind::Recv => 6,
                Kind::Coll => 7,
                _ => 1,
            };
            pb::Node {
                id: *id,
                name: format!("n{id}"),
                r#type: code,
                data_deps: deps.clone(),
                duration_micros: 1,
                attr,
                ..pb::Node::default()
            }
            .encode_length_delimited(&mut out)
            .unwrap();
        }
        out
    }

    /// Each communicator's collectives: `inst[g][place][k]` is the node
    /// of the member at `place` in communicator g's k-th collective.
    fn inst_of(nodes: &[Nodes], groups: &[Group]) -> Vec<Vec<Vec<usize>>> {
        let mut inst: Vec<Vec<Vec<usize>>> = groups
            .iter()
            .map(|g| vec![Vec::new(); g.ranks.len()])
            .collect();
        for (r, n) in nodes.iter().enumerate() {
            for node in n.iter().filter(|x| x.kind == Kind::Coll) {
                let name = node.comm().pg_name.as_deref().unwrap_or("");
                let gi = group_of(groups, name, String::new).unwrap();
                inst[gi][groups[gi].place(r).unwrap()].push(node.at as usize);
            }
        }
        inst
    }

    /// The order `Order` gives over each rank's file read a window at a
    /// time (let go as it goes), and the order by passes; each
    /// collective's members checked.
    type Orders = Result<Vec<Step>, (usize, usize)>;
    fn both_orders(
        files: &[Vec<u8>],
        given: &[(String, Vec<i64>)],
        window: usize,
    ) -> (Orders, Orders, Orders) {
        let trace = Trace::from_bytes(files.to_vec(), window).unwrap();
        let settings = Settings {
            gpus: (0..files.len() as u32).map(GpuId).collect(),
            algorithm: None,
            channels: 1,
            chunk: 1 << 20,
            pxn: false,
            protocol: collective::Protocol::Simple,
            auto: collective::Auto::default(),
            groups: given.to_vec(),
            sizes: CommSizes::AstraSim,
            window,
        };
        let groups: Arc<[Group]> = communicators(&trace, &settings).unwrap().into();
        check_collectives(&trace, &groups).unwrap();
        let nodes: Vec<Nodes> = files.iter().map(|f| decode(f).unwrap()).collect();
        let inst = inst_of(&nodes, &groups);
        let (mut w, mut o) = TraceGen::begin(&trace, Arc::clone(&groups), window).unwrap();
        let mut steps = Vec::new();
        let mut taken = vec![0; groups.len()];
        let got = loop {
            match o.next(&mut w) {
                Ok(Some(step)) => {
                    if let Step::Collective(gi) = step {
                        let gi = gi as usize;
                        let want: Vec<u32> = inst[gi].iter().map(|m| m[taken[gi]] as u32).collect();
                        assert_eq!(o.members(), &want[..]);
                        taken[gi] += 1;
                    }
                    steps.push(step);
                    for r in 0..files.len() {
                        w.trim(r, o.lo(r));
                    }
                }
                Ok(None) => break Ok(steps),
                Err(order::Stop::Stuck(r, i)) => break Err((r, i)),
                Err(order::Stop::Read(m)) => panic!("{m}"),
            }
        };
        let want = by_passes(&nodes, &groups, &inst, window);
        let whole = by_passes(&nodes, &groups, &inst, usize::MAX);
        (got, want, whole)
    }

    #[test]
    fn the_order_is_that_of_passes_without_the_passes() {
        let (mut ok, mut stuck, mut narrowed) = (0, 0, 0);
        for seed in 0..400 {
            let (files, groups) = random_trace(seed);
            for window in [usize::MAX, 1, 2, 3, 5, 8, 16] {
                let (got, want, whole) = both_orders(&files, &groups, window);
                assert_eq!(got, want, "seed {seed}, window {window}");
                match got {
                    Ok(_) => ok += 1,
                    Err(_) => stuck += 1,
                }
                if want.is_ok() && want != whole {
                    narrowed += 1;
                }
            }
        }
        // Every kind of trace was tried: orders that run, that are stuck,
        // and that a window changes.
        assert!(
            ok > 400 && stuck > 100 && narrowed > 50,
            "{ok} {stuck} {narrowed}"
        );
    }

    #[test]
    fn reads_the_all_reduce_trace() {
        let dir = Path::new("testdata/chakra/all_reduce_8npus_1MB");
        let t = read_dir(dir, WINDOW).unwrap();
        assert_eq!((t.rank_count(), t.node_count()), (8, 8));
        for r in 0..8 {
            let file = dir.join(format!("all_reduce.{r}.et"));
            let nodes = decode(&std::fs::read(file).unwrap()).unwrap();
            assert_eq!(nodes.len(), 1);
            let n = nodes.node(0);
            assert_eq!(n.kind, Kind::Coll);
            assert_eq!(n.id, r as u64);
            assert_eq!(n.comm().comm_type, Some(0));
            assert_eq!(n.comm().comm_size, Some(1_048_576));
            assert!(!n.cpu);
        }
    }

    /// Random bytes, and the real trace cut or flipped anywhere, decode
    /// to a result or an error, never a panic.
    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut rng = crate::rng::Streams::new(9).stream("chakra-fuzz");
        let real = std::fs::read("testdata/chakra/all_reduce_8npus_1MB/all_reduce.3.et").unwrap();
        for i in 0..5000 {
            let buf: Vec<u8> = if i % 2 == 0 {
                let n = rng.below(200) as usize;
                (0..n).map(|_| rng.next_u64() as u8).collect()
            } else {
                let mut b = real.clone();
                let at = rng.below(b.len() as u64) as usize;
                b[at] ^= 1 << rng.below(8);
                b.truncate(at + rng.below((b.len() - at) as u64 + 1) as usize);
                b
            };
            let _ = decode(&buf);
        }
    }

    /// A rank's file of compute nodes, each (id, name, dependencies).
    fn file_of(nodes: &[(u64, &str, &[u64])]) -> Vec<u8> {
        use prost::Message;
        let mut buf = Vec::new();
        pb::GlobalMetadata::default()
            .encode_length_delimited(&mut buf)
            .unwrap();
        for &(id, name, deps) in nodes {
            let n = pb::Node {
                id,
                name: name.into(),
                r#type: 4,
                data_deps: deps.to_vec(),
                duration_micros: id,
                ..Default::default()
            };
            n.encode_length_delimited(&mut buf).unwrap();
        }
        buf
    }

    /// Dependencies are found by id wherever they are in the file, and
    /// a file whose ids repeat or whose dependencies are missing is an
    /// error naming the node.
    #[test]
    fn dependencies_are_places_in_the_rank() {
        let nodes = decode(&file_of(&[
            (7, "a", &[9]),
            (3, "b", &[]),
            (9, "c", &[3, 7]),
        ]))
        .unwrap();
        assert_eq!(nodes.len(), 3);
        let deps: Vec<&[u32]> = nodes.iter().map(|n| n.deps).collect();
        assert_eq!(deps, [&[2][..], &[], &[1, 0]]);
        assert_eq!(nodes.node(2).id, 9);
        assert_eq!(nodes.node(2).duration, SimTime::from_us(9));
        assert_eq!(nodes.node(1).comm(), &Comm::default());
        let e = decode(&file_of(&[(1, "a", &[]), (2, "b", &[]), (1, "again", &[])])).unwrap_err();
        assert!(
            e.contains("node 1 (\"again\"), message 3") && e.contains("used twice"),
            "{e}"
        );
        let e = decode(&file_of(&[(1, "a", &[]), (2, "b", &[1, 5])])).unwrap_err();
        assert!(
            e.contains("node 2 (\"b\"), message 2: depends on node 5"),
            "{e}"
        );
    }

    #[test]
    fn bad_streams_are_errors_not_panics() {
        assert!(decode(&[]).is_err());
        assert!(decode(&[0x05, 0x0a]).unwrap_err().contains("past the end"));
        assert!(decode(&[0xff; 12]).is_err());
        // Metadata then a node whose field 3 has the wrong wire type.
        assert!(decode(&[0x00, 0x02, 0x1a, 0x00]).is_err());
    }
}

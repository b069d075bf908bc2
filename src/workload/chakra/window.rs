//! Each rank's nodes read again from its file a window at a time, as the
//! order (`order`) reaches them, so that memory holds the windows and
//! not the trace.
//!
//! A rank's file is read whole once when the trace is read (`Survey`):
//! that checks it and finds what reading it again in order needs: how
//! far ahead of a node its dependencies go, and the nodes that a node
//! further than a window after them depends on. Reading it again, a
//! rank holds the nodes from a window before its first node not yet in
//! the order (the dependencies of the nodes in view) to as far ahead as
//! the nodes in view depend on, and the tasks of those far-off nodes
//! until the last node that needs them is made. Nothing else of the
//! trace stays in memory.

use super::order::Ranks;
use super::{Comm, Group, Kind, Messages, Node, Nodes, NO_COMM};
use crate::units::SimTime;
use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

/// Where a rank's nodes are read from.
#[derive(Clone, Debug)]
pub(super) enum Source {
    File(std::path::PathBuf),
    Bytes(Arc<[u8]>),
}

impl Source {
    /// Its messages from byte `offset` on, and the stream's length.
    fn messages(
        &self,
        offset: u64,
    ) -> Result<(Messages<Box<dyn std::io::Read + '_>>, u64), String> {
        match self {
            Source::File(path) => {
                use std::io::Seek;
                let (mut file, len) =
                    crate::input::open_file(path, crate::input::MAX_TRACE_BYTES, "trace file")?;
                file.seek(std::io::SeekFrom::Start(offset))
                    .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
                let reader = std::io::BufReader::with_capacity(1 << 16, file);
                Ok((
                    Messages::new(Box::new(reader), len.saturating_sub(offset)),
                    len,
                ))
            }
            Source::Bytes(b) => {
                let rest = &b[(offset as usize).min(b.len())..];
                Ok((
                    Messages::new(Box::new(rest), rest.len() as u64),
                    b.len() as u64,
                ))
            }
        }
    }

    /// The stream's messages from the start.
    pub fn stream(&self) -> Result<Messages<Box<dyn std::io::Read + '_>>, String> {
        self.messages(0).map(|m| m.0)
    }

    /// The name of its node at `place`, if it can be read again.
    pub fn name(&self, place: usize) -> Option<String> {
        match self {
            Source::File(path) => super::name_in_file(path, place),
            Source::Bytes(b) => super::name_in(b, place),
        }
    }

    /// An error about it, with its file.
    pub fn whence(&self, e: String) -> String {
        match self {
            Source::File(path) => format!("{}: {e}", path.display()),
            Source::Bytes(_) => e,
        }
    }

    fn what(&self) -> String {
        match self {
            Source::File(path) => path.display().to_string(),
            Source::Bytes(_) => "the trace".into(),
        }
    }
}

/// What reading a rank's file whole found, for reading it again.
#[derive(Clone, Debug, Default)]
pub(super) struct Survey {
    pub len: usize,
    /// Where its first node's message begins, and the stream's length.
    pub first: u64,
    pub bytes: u64,
    /// The furthest a node's dependency is after it, and before it
    /// (within a window), in places.
    pub ahead: usize,
    pub back: usize,
    /// The nodes that some node more than a window after them depends
    /// on, by id: their place, and the last place that depends on them.
    pub far: HashMap<u64, (u32, u32)>,
    /// Whether ids rise in file order (then a held node is found by its
    /// id without an index).
    pub rising: bool,
}

impl Survey {
    /// What reading `nodes` again with `window` needs.
    pub fn of(nodes: &Nodes, window: usize, first: u64, bytes: u64) -> Survey {
        let mut s = Survey {
            len: nodes.len(),
            first,
            bytes,
            rising: nodes.ids.windows(2).all(|w| w[0] < w[1]),
            ..Survey::default()
        };
        for i in 0..nodes.len() {
            for &d in nodes.deps(i) {
                let d = d as usize;
                if d > i {
                    s.ahead = s.ahead.max(d - i);
                } else if i - d > window {
                    let e = s.far.entry(nodes.ids[d]).or_insert((d as u32, 0));
                    e.1 = e.1.max(i as u32);
                } else {
                    s.back = s.back.max(i - d);
                }
            }
        }
        s
    }
}

/// Not yet known: a dependency on a node not read yet.
const UNKNOWN: u32 = u32::MAX;

/// How many nodes a rank reads at a time, at least.
const BATCH: usize = 256;

/// One rank's nodes from `base` on, as read again.
#[derive(Clone, Debug)]
struct Window {
    source: Arc<Source>,
    survey: Arc<Survey>,
    /// Bytes of the stream read so far.
    offset: u64,
    /// The place of the first node held.
    base: usize,
    ids: Vec<u64>,
    kinds: Vec<(Kind, bool)>,
    durations: Vec<SimTime>,
    /// Where each node's dependencies begin in `deps`, then the end.
    deps_at: Vec<u32>,
    deps: Vec<u32>,
    /// Dependencies dropped from the front of `deps`.
    deps_gone: usize,
    /// The nodes with communication fields, by place; each held node's
    /// (counting those dropped), or `UNKNOWN`.
    comms: Vec<(u32, Comm)>,
    comm_of: Vec<u32>,
    comms_gone: usize,
    /// Each held node's task, once made.
    tasks: Vec<u32>,
    /// Places of the held nodes, by id (unless ids rise).
    places: HashMap<u64, u32>,
    /// Dependencies on nodes not read yet, by id: where in `deps`
    /// (counting those dropped).
    pending: HashMap<u64, Vec<usize>>,
    /// Tasks of far-off nodes (`Survey::far`) that a node not yet made
    /// needs, by place, and the last place that needs each.
    far_tasks: HashMap<u32, (u32, u32)>,
}

impl Window {
    fn new(source: Arc<Source>, survey: Arc<Survey>) -> Window {
        Window {
            offset: survey.first,
            source,
            survey,
            base: 0,
            ids: Vec::new(),
            kinds: Vec::new(),
            durations: Vec::new(),
            deps_at: vec![0],
            deps: Vec::new(),
            deps_gone: 0,
            comms: Vec::new(),
            comm_of: Vec::new(),
            comms_gone: 0,
            tasks: Vec::new(),
            places: HashMap::default(),
            pending: HashMap::default(),
            far_tasks: HashMap::default(),
        }
    }

    /// Places up to `end` are read.
    fn end(&self) -> usize {
        self.base + self.ids.len()
    }

    /// Reads on until every node before `end` is held, and what they
    /// depend on.
    fn reach(&mut self, end: usize) -> Result<(), String> {
        let want = end.saturating_add(self.survey.ahead).min(self.survey.len);
        if self.end() >= want {
            return Ok(());
        }
        let want = want.max(self.end() + BATCH).min(self.survey.len);
        let source = Arc::clone(&self.source);
        let changed = || {
            format!(
                "{}: the trace file changed while the run was reading it",
                source.what()
            )
        };
        let (mut m, bytes) = source.messages(self.offset)?;
        if bytes != self.survey.bytes {
            return Err(changed());
        }
        let left = m.left;
        while self.end() < want {
            let msg = m.next().map_err(|_| changed())?.ok_or_else(changed)?;
            let raw = super::lean::node(msg).ok_or_else(changed)?;
            self.push(raw)?;
        }
        self.offset += left - m.left;
        Ok(())
    }

    fn push(&mut self, raw: super::Raw) -> Result<(), String> {
        let place = self.end() as u32;
        for d in &raw.deps {
            let held = if self.survey.rising {
                self.ids
                    .binary_search(d)
                    .ok()
                    .map(|k| (self.base + k) as u32)
            } else {
                self.places.get(d).copied()
            };
            let at = match held {
                Some(p) => p,
                None => match self.survey.far.get(d) {
                    Some(&(p, _)) => p,
                    None => {
                        let k = self.deps_gone + self.deps.len();
                        self.pending.entry(*d).or_default().push(k);
                        UNKNOWN
                    }
                },
            };
            self.deps.push(at);
        }
        let taken = if self.survey.rising {
            self.ids.last().is_some_and(|&l| l >= raw.id)
        } else {
            self.places.insert(raw.id, place).is_some()
        };
        if taken {
            return Err(format!(
                "{}: the trace file changed while the run was reading it",
                self.source.what()
            ));
        }
        if let Some(list) = self.pending.remove(&raw.id) {
            for k in list {
                self.deps[k - self.deps_gone] = place;
            }
        }
        self.deps_at.push(self.deps.len() as u32);
        self.ids.push(raw.id);
        self.kinds.push((raw.kind, raw.cpu));
        self.durations.push(raw.duration);
        if raw.comm != NO_COMM {
            self.comm_of
                .push((self.comms_gone + self.comms.len()) as u32);
            self.comms.push((place, raw.comm));
        } else {
            self.comm_of.push(UNKNOWN);
        }
        self.tasks.push(super::NOT_MADE);
        Ok(())
    }

    /// Lets go of the nodes before `place`, once they are at least a
    /// quarter as many as those held after them (so each node is moved
    /// at most a few times).
    fn trim(&mut self, place: usize) {
        let k = place.saturating_sub(self.base).min(self.ids.len());
        if k < BATCH || k < (self.ids.len() - k) / 4 {
            return;
        }
        if !self.survey.rising {
            for id in &self.ids[..k] {
                self.places.remove(id);
            }
        }
        self.ids.drain(..k);
        self.kinds.drain(..k);
        self.durations.drain(..k);
        self.tasks.drain(..k);
        self.comm_of.drain(..k);
        let gone = self.deps_at[k] as usize;
        self.deps.drain(..gone);
        self.deps_gone += gone;
        self.deps_at.drain(..k);
        for a in &mut self.deps_at {
            *a -= gone as u32;
        }
        self.base += k;
        let c = self.comms.partition_point(|c| (c.0 as usize) < self.base);
        self.comms.drain(..c);
        self.comms_gone += c;
    }

    fn index(&self, place: usize) -> usize {
        debug_assert!(
            place >= self.base && place < self.end(),
            "node {place} is not held"
        );
        place - self.base
    }

    fn node(&self, place: usize) -> Node<'_> {
        let k = self.index(place);
        let comm = match self.comm_of[k] {
            UNKNOWN => &NO_COMM,
            c => &self.comms[c as usize - self.comms_gone].1,
        };
        let (kind, cpu) = self.kinds[k];
        Node {
            at: place as u32,
            id: self.ids[k],
            kind,
            cpu,
            duration: self.durations[k],
            deps: &self.deps[self.deps_at[k] as usize..self.deps_at[k + 1] as usize],
            comm,
        }
    }
}

/// Every rank's window, and the communicators their collective nodes
/// name.
#[derive(Clone, Debug)]
pub(super) struct Windows {
    ranks: Vec<Window>,
    groups: Arc<[Group]>,
    /// The communicators after the first, by name.
    names: Arc<HashMap<String, usize>>,
}

impl Windows {
    pub fn new(sources: &[Arc<Source>], surveys: &[Arc<Survey>], groups: Arc<[Group]>) -> Windows {
        let names = groups
            .iter()
            .enumerate()
            .skip(1)
            .map(|(i, g)| (g.name.clone(), i))
            .collect();
        Windows {
            ranks: sources
                .iter()
                .zip(surveys)
                .map(|(s, v)| Window::new(Arc::clone(s), Arc::clone(v)))
                .collect(),
            groups,
            names: Arc::new(names),
        }
    }

    /// The id of node `place` of rank r (held).
    pub fn node_id(&self, r: usize, place: usize) -> u64 {
        let w = &self.ranks[r];
        w.ids[w.index(place)]
    }

    /// Lets go of what no node from `lo` on (rank r's first not yet in
    /// the order) can need: the nodes before it further than any of its
    /// dependencies within a window reaches back.
    pub fn trim(&mut self, r: usize, lo: usize) {
        let w = &mut self.ranks[r];
        w.trim(lo.saturating_sub(w.survey.back));
    }

    /// The task of node `place` of rank r, as node `by` of that rank
    /// needs it; a far-off node's is let go after the last that needs it.
    pub fn task(&mut self, r: usize, place: usize, by: usize) -> u32 {
        let w = &mut self.ranks[r];
        if !w.far_tasks.is_empty() {
            if let Some(&(t, last)) = w.far_tasks.get(&(place as u32)) {
                if last as usize <= by {
                    w.far_tasks.remove(&(place as u32));
                }
                return t;
            }
        }
        w.tasks[w.index(place)]
    }

    /// Node `place` of rank r is made as task `t`.
    pub fn set_task(&mut self, r: usize, place: usize, t: u32) {
        let w = &mut self.ranks[r];
        let k = w.index(place);
        w.tasks[k] = t;
        if let Some(&(_, last)) = w.survey.far.get(&w.ids[k]) {
            w.far_tasks.insert(place as u32, (t, last));
        }
    }
}

impl Ranks for Windows {
    fn groups(&self) -> &[Group] {
        &self.groups
    }

    fn len(&self, r: usize) -> usize {
        self.ranks[r].survey.len
    }

    fn kind(&self, r: usize, i: usize) -> Kind {
        let w = &self.ranks[r];
        w.kinds[w.index(i)].0
    }

    fn deps(&self, r: usize, i: usize) -> &[u32] {
        let w = &self.ranks[r];
        let k = w.index(i);
        &w.deps[w.deps_at[k] as usize..w.deps_at[k + 1] as usize]
    }

    fn node(&self, r: usize, i: usize) -> Node<'_> {
        self.ranks[r].node(i)
    }

    fn group_of(&self, r: usize, i: usize) -> (usize, usize) {
        let name = self.ranks[r]
            .node(i)
            .comm()
            .pg_name
            .as_deref()
            .unwrap_or("");
        let gi = self.names.get(name).copied().unwrap_or(0);
        let place = self.groups[gi].place(r).expect("a member of its group");
        (gi, place)
    }

    fn reach(&mut self, r: usize, end: usize) -> Result<(), String> {
        self.ranks[r].reach(end)
    }
}

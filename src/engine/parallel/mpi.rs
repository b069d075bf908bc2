//! The partitions of a run as MPI ranks (`fabricsim run --mpi` under
//! `mpirun` or `srun`), built with the `mpi` feature.
//!
//! Every rank reads the same scenario and builds the whole simulation, as
//! every thread does in a run on threads, then runs the partition of its
//! rank: the same cut, the same windows and the same decisions, with the
//! figures and the mail of a window swapped by two collectives (the
//! sizes, then the bytes, `MPI_Alltoall` and `MPI_Alltoallv`). At the end
//! each rank encodes what its partition owns (`Fragment`) and rank 0
//! gathers, merges and writes the outputs: the same files as one thread.
//! Ranks past the number of partitions the fabric can be cut into wait
//! for the end.

use super::{
    drive, merge, plan, Exchange, Fragment, Global, Lead, Mail, ParallelStats, Share, Slot,
};
use crate::engine::{deadlock, Limits, Progress, Simulation, StopReason};
use crate::units::SimTime;
use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::topology::{Color, Communicator, SimpleCommunicator};
use mpi::traits::*;
use mpi::Count;
use std::time::Instant;

/// MPI, started once per process; finalized when dropped.
pub struct Ranks {
    world: SimpleCommunicator,
    // Dropped last: finalizes MPI.
    _universe: mpi::environment::Universe,
}

impl Ranks {
    /// Starts MPI (every rank calls this once).
    pub fn start() -> Result<Ranks, String> {
        let universe = mpi::initialize().ok_or("--mpi: MPI was already started in this process")?;
        Ok(Ranks {
            world: universe.world(),
            _universe: universe,
        })
    }

    /// This process's rank, from 0.
    pub fn rank(&self) -> u32 {
        self.world.rank() as u32
    }

    pub fn size(&self) -> u32 {
        self.world.size() as u32
    }

    /// Whether every rank says yes (each rank's answer to a question they
    /// all ask, such as whether the scenario loaded).
    pub fn all(&self, yes: bool) -> bool {
        let mut all = 0u8;
        self.world
            .all_reduce_into(&u8::from(yes), &mut all, SystemOperation::min());
        all == 1
    }
}

/// A rank's side of a run cut over ranks.
struct Comm<'a> {
    world: &'a SimpleCommunicator,
    me: usize,
    n: usize,
    /// Frames this rank sent across the cut.
    messages: u64,
}

fn count(n: usize) -> Count {
    Count::try_from(n).expect("less than 2 GiB swapped per window")
}

/// Where each of `counts` starts in one buffer.
fn displacements(counts: &[Count]) -> Vec<Count> {
    counts
        .iter()
        .scan(0, |at, &c| {
            let d = *at;
            *at += c;
            Some(d)
        })
        .collect()
}

/// Rank 0 gets every other rank's `bytes`, in rank order; the others get
/// nothing.
fn gather(world: &SimpleCommunicator, me: usize, n: usize, bytes: &[u8]) -> Vec<Vec<u8>> {
    let root = world.process_at_rank(0);
    if me != 0 {
        root.gather_into(&count(bytes.len()));
        root.gather_varcount_into(bytes);
        return Vec::new();
    }
    let mut counts = vec![0 as Count; n];
    root.gather_into_root(&0, &mut counts[..]);
    let displs = displacements(&counts);
    let mut all = vec![0u8; counts.iter().map(|&c| c as usize).sum()];
    {
        let mut into = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
        root.gather_varcount_into_root(&[][..] as &[u8], &mut into);
    }
    (1..n)
        .map(|r| {
            let (d, c) = (displs[r] as usize, counts[r] as usize);
            all[d..d + c].to_vec()
        })
        .collect()
}

impl Comm<'_> {
    /// Every rank's `bytes`, in rank order.
    fn all_gather(&self, bytes: &[u8]) -> Vec<Vec<u8>> {
        let mut counts = vec![0 as Count; self.n];
        self.world
            .all_gather_into(&count(bytes.len()), &mut counts[..]);
        let displs = displacements(&counts);
        let mut all = vec![0u8; counts.iter().map(|&c| c as usize).sum()];
        {
            let mut into = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
            self.world.all_gather_varcount_into(bytes, &mut into);
        }
        counts
            .iter()
            .zip(&displs)
            .map(|(&c, &d)| all[d as usize..(d + c) as usize].to_vec())
            .collect()
    }
}

impl Exchange for Comm<'_> {
    fn window(&mut self, slot: Slot, out: Vec<Mail>) -> (Global, Mail) {
        let mut send = Vec::new();
        let mut counts = vec![0 as Count; self.n];
        // Mail to itself (data lost on a QP it receives) stays here.
        let mut mail = Mail::default();
        for (to, mut m) in out.into_iter().enumerate() {
            if to == self.me {
                mail.append(&mut m);
                continue;
            }
            let mail = m;
            self.messages += mail.frames.len() as u64;
            let at = send.len();
            send = postcard::to_extend(&(slot, mail), send).expect("a window's mail encodes");
            counts[to] = count(send.len() - at);
        }
        let displs = displacements(&counts);
        let mut rcounts = vec![0 as Count; self.n];
        self.world.all_to_all_into(&counts[..], &mut rcounts[..]);
        let rdispls = displacements(&rcounts);
        let mut recv = vec![0u8; rcounts.iter().map(|&c| c as usize).sum()];
        {
            let from = Partition::new(&send[..], &counts[..], &displs[..]);
            let mut into = PartitionMut::new(&mut recv[..], &rcounts[..], &rdispls[..]);
            self.world.all_to_all_varcount_into(&from, &mut into);
        }
        let mut slots = vec![slot; self.n];
        for from in (0..self.n).filter(|&r| r != self.me) {
            let (d, c) = (rdispls[from] as usize, rcounts[from] as usize);
            let (theirs, mut m): (Slot, Mail) =
                postcard::from_bytes(&recv[d..d + c]).expect("a rank's own encoding decodes");
            slots[from] = theirs;
            mail.append(&mut m);
        }
        (Global::of(&slots), mail)
    }

    fn stuck(&mut self, mine: Vec<deadlock::Stuck>) -> Vec<deadlock::Stuck> {
        let bytes = postcard::to_stdvec(&mine).expect("stuck queues encode");
        self.all_gather(&bytes)
            .iter()
            .flat_map(|b| {
                postcard::from_bytes::<Vec<deadlock::Stuck>>(b)
                    .expect("a rank's own encoding decodes")
            })
            .collect()
    }

    fn over(&mut self, mine: Vec<u32>) -> Vec<u32> {
        let mut all = vec![0u32; mine.len()];
        if !mine.is_empty() {
            self.world
                .all_reduce_into(&mine[..], &mut all[..], SystemOperation::min());
        }
        all
    }

    fn share(&mut self, mine: Share) -> Vec<Share> {
        let bytes = if self.me == 0 {
            Vec::new()
        } else {
            postcard::to_stdvec(&mine).expect("a share encodes")
        };
        gather(self.world, self.me, self.n, &bytes)
            .iter()
            .map(|b| postcard::from_bytes(b).expect("a rank's own encoding decodes"))
            .collect()
    }

    fn watch(&mut self, mine: (u64, bool)) -> (u64, bool) {
        let mut all = vec![0u64; 2 * self.n];
        self.world
            .all_gather_into(&[mine.0, u64::from(mine.1)][..], &mut all[..]);
        all.chunks(2)
            .fold((0, false), |(m, w), c| (m + c[0], w || c[1] != 0))
    }
}

/// Runs `sim`, built on every rank from the same scenario, cut over the
/// ranks. Rank 0 gets the merged simulation, whose outputs are those of
/// one thread; the other ranks get `None`. A run that cannot be cut (see
/// `plan`) runs on rank 0 alone and says why.
pub fn run(
    mut sim: Simulation,
    ranks: &Ranks,
    limits: &Limits,
    progress: &mut dyn FnMut(&Progress),
) -> Option<(Simulation, StopReason)> {
    let t0 = Instant::now();
    let (rank, size) = (ranks.rank(), ranks.size());
    let p = match plan(&sim, size) {
        Ok(p) => p,
        Err(why) => {
            if rank != 0 {
                return None;
            }
            if size > 1 {
                sim.note_one_partition(size, why.replace("thread", "rank"));
            }
            let stop = sim.run_limited(limits, progress);
            return Some((sim, stop));
        }
    };
    let n = p.parts as usize;
    // Ranks past the partitions (a fabric too small for them all) leave.
    let color = if (rank as usize) < n {
        Color::with_value(0)
    } else {
        Color::undefined()
    };
    let world = ranks.world.split_by_color(color)?;
    let me = rank as usize;
    let lookahead = p.lookahead.expect("a cut with a lookahead").0;
    let (port_part, homes) = sim.cut(&p);
    sim.make_partition(&p, port_part, homes, rank);
    if let Some(c) = sim.capture.as_deref_mut() {
        c.record();
    }
    world.barrier();
    let build = t0.elapsed();
    let lead = (me == 0).then(|| Lead::new(&sim, limits, progress, t0 + build));
    let mut comm = Comm {
        world: &world,
        me,
        n,
        messages: 0,
    };
    let (stop, windows) = drive(&mut sim, &mut comm, lookahead, limits.max_events, lead);
    let mut end = 0u64;
    world.all_reduce_into(&sim.now.0, &mut end, SystemOperation::max());
    sim.close(SimTime(end));
    let mut messages = 0u64;
    world.all_reduce_into(&comm.messages, &mut messages, SystemOperation::sum());
    if me != 0 {
        let bytes = sim.into_fragment().encode();
        gather(&world, me, n, &bytes);
        return None;
    }
    let all = gather(&world, me, n, &[]);
    let fragments = all
        .iter()
        .map(|b| Fragment::decode(b).expect("rank 0 decodes what every rank encoded"));
    let stats = ParallelStats {
        threads: size,
        partitions: n as u32,
        one_because: None,
        cut: format!("{} over {n} MPI ranks", p.describe()),
        lookahead_ps: lookahead,
        windows,
        messages,
        events: Vec::new(),
        build_seconds: build.as_secs_f64(),
    };
    Some((merge(sim, fragments, &p, stats), stop))
}

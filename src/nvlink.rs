//! NVLink copies inside a host: each GPU sends and receives over its
//! NVLink at one rate, and the copies under way share each GPU's send
//! and receive side max-min fairly, worked out anew only when copies
//! start or end. A copy between a GPU and the switch chips (NVLS: the
//! switch reads and sums, or multicasts) uses one side of the GPU. A
//! leaf: it knows hosts and GPUs by index and nothing of the engine,
//! which schedules the events it asks for (`Event::Nvlink`).

use crate::units::SimTime;

/// The generation of an `Event::Nvlink` that shares a host's rates
/// anew once the copies starting at an instant are in, when more than
/// one does (no copy finishes with it).
pub const RESHARE: u32 = u32::MAX;

/// The far end of a one-sided copy between a GPU and its host's NVLink
/// switch chips (NVLS: the switch reads and reduces, or multicasts): in
/// place of a GPU's local index, it uses only the GPU's side. The switch
/// chips carry what their GPU ports bring, so the switch is no resource
/// of its own.
pub const SWITCH: u32 = u32::MAX;

/// NVLink copies in flight, host by host.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Nvlink {
    /// Bytes per picosecond a GPU sends (and receives) over NVLink.
    rate: f64,
    /// Where GPUs are a mesh (`ScaleUp::Mesh`): what the one link between
    /// two of them carries each way, bytes per picosecond.
    mesh: Option<f64>,
    pub latency: SimTime,
    hosts: Vec<HostCopies>,
    /// Bytes copied over NVLink in all.
    pub bytes: u64,
}

#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct HostCopies {
    copies: Vec<Copy>,
    /// The part of each GPU's rate its failed switch chips took.
    lost: f64,
    last: SimTime,
    gen: u32,
    /// Copies with a rate cap (streams'), so that sharing skips caps
    /// when there are none.
    capped: u32,
    /// Copies came in at this instant and their rates are not shared
    /// yet: an event with generation `RESHARE` is pending (`started`).
    dirty: bool,
    /// When a copy last started (and the rates were shared at once).
    started_at: Option<SimTime>,
    /// Sharing's working lists, kept so that it allocates nothing.
    #[serde(skip)]
    scratch: ShareScratch,
}

#[derive(Debug, Default)]
struct ShareScratch {
    cap: Vec<f64>,
    users: Vec<u32>,
    fixed: Vec<bool>,
    now_fixed: Vec<usize>,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Copy {
    task: u32,
    src: u32,
    dst: u32,
    left: f64,
    rate: f64,
    /// Its rate cap (infinite for none), and the ring pass whose stream
    /// it is part of (`runtime::streams`; `u32::MAX` for a task's copy).
    cap: f64,
    stream: u32,
}

/// What an NVLink event finished: copies of tasks, and a copy of each of
/// these streams (`runtime::streams`).
#[derive(Debug, Default)]
pub struct Finished {
    pub tasks: Vec<u32>,
    pub streams: Vec<u32>,
}

impl Nvlink {
    /// `bytes_per_s`: what one GPU sends (and receives) per second.
    /// How long a copy of `bytes` takes alone on idle NVLink, latency
    /// included: the ideal of an NVLink row in flows.csv.
    /// Bytes per picosecond a GPU sends (and receives).
    pub fn rate(&self) -> f64 {
        self.rate
    }

    pub fn alone(&self, bytes: u64) -> SimTime {
        SimTime((bytes as f64 / self.rate).ceil() as u64) + self.latency
    }

    pub fn new(hosts: usize, bytes_per_s: u64, latency: SimTime) -> Self {
        Nvlink {
            rate: bytes_per_s as f64 / 1e12,
            mesh: None,
            latency,
            hosts: (0..hosts).map(|_| HostCopies::default()).collect(),
            bytes: 0,
        }
    }

    /// GPUs linked pair by pair, each link carrying `bytes_per_s` each
    /// way: a copy goes no faster, and copies between one pair share it.
    pub fn with_mesh(mut self, bytes_per_s: u64) -> Self {
        self.mesh = Some(bytes_per_s as f64 / 1e12);
        self
    }

    /// `lost` of every GPU's rate in `host` is gone (its failed switch
    /// chips' share; 0 when all are up) from `now`: returns the event to
    /// schedule for the host's copies at their new rates.
    pub fn set_lost(&mut self, host: usize, lost: f64, now: SimTime) -> Option<(SimTime, u32)> {
        let h = &mut self.hosts[host];
        h.advance(now);
        h.lost = lost.clamp(0.0, 1.0);
        h.share(self.rate, self.mesh);
        h.next(now)
    }

    /// Starts a copy; returns the event to schedule (time and
    /// generation): when the host's next copy finishes or, for a second
    /// copy starting at this instant, the one sharing the rates once all
    /// are in (none for a third).
    pub fn add(
        &mut self,
        host: usize,
        task: u32,
        src: u32,
        dst: u32,
        bytes: u64,
        now: SimTime,
    ) -> Option<(SimTime, u32)> {
        self.push_copy(
            host,
            (task, u32::MAX),
            (src, dst),
            bytes,
            f64::INFINITY,
            now,
        );
        self.started(host, now)
    }

    /// Starts a one-sided copy between GPU `gpu` and the switch chips
    /// (`up`: the GPU sends; otherwise it receives) at most `cap` bytes
    /// per picosecond with every chip up (failed chips take their share
    /// of it); returns the event to schedule, as `add` does.
    pub fn add_switch(
        &mut self,
        host: usize,
        task: u32,
        (gpu, up): (u32, bool),
        bytes: u64,
        cap: f64,
        now: SimTime,
    ) -> Option<(SimTime, u32)> {
        let ends = if up { (gpu, SWITCH) } else { (SWITCH, gpu) };
        self.push_copy(host, (task, u32::MAX), ends, bytes, cap, now);
        self.started(host, now)
    }

    /// Starts copies of a ring pass's stream, each of `bytes` between
    /// the local GPUs of a pair, at most `cap` bytes per picosecond each;
    /// returns the event to schedule, as `add` does.
    pub fn add_stream(
        &mut self,
        host: usize,
        pass: u32,
        pairs: &[(u32, u32, u64)],
        cap: f64,
        now: SimTime,
    ) -> Option<(SimTime, u32)> {
        if pairs.is_empty() {
            return None;
        }
        for &(src, dst, bytes) in pairs {
            self.push_copy(host, (u32::MAX, pass), (src, dst), bytes, cap, now);
        }
        self.started(host, now)
    }

    /// Puts a copy in `host`'s list, its rate not shared yet.
    fn push_copy(
        &mut self,
        host: usize,
        (task, stream): (u32, u32),
        (src, dst): (u32, u32),
        bytes: u64,
        cap: f64,
        now: SimTime,
    ) {
        self.bytes += bytes;
        let h = &mut self.hosts[host];
        h.advance(now);
        h.capped += u32::from(cap.is_finite());
        h.copies.push(Copy {
            task,
            src,
            dst,
            left: bytes as f64,
            rate: 0.0,
            cap,
            stream,
        });
    }

    /// Copies just started in `host`: shares its rates, or asks for it
    /// to be done once every copy starting at this instant is in.
    fn started(&mut self, host: usize, now: SimTime) -> Option<(SimTime, u32)> {
        let h = &mut self.hosts[host];
        if h.dirty {
            return None;
        }
        if h.started_at != Some(now) {
            // The first to start at this instant: shared at once.
            h.started_at = Some(now);
            h.share(self.rate, self.mesh);
            return h.next(now);
        }
        // More start at this instant (a collective starts hundreds in a
        // host at once, and sharing after each was quadratic): the
        // pending event is stale, and one event at this instant shares
        // once all are in. No time passes between, so no byte moves at a
        // rate about to change.
        h.bump();
        h.dirty = true;
        Some((now, RESHARE))
    }

    /// The host's earliest copy may be done: returns the copies finished
    /// and the next event.
    pub fn on_event(
        &mut self,
        host: usize,
        gen: u32,
        now: SimTime,
    ) -> (Finished, Option<(SimTime, u32)>) {
        let h = &mut self.hosts[host];
        let mut done = Finished::default();
        if gen == RESHARE {
            debug_assert!(h.dirty, "one sharing event per instant with new copies");
            h.dirty = false;
            h.share(self.rate, self.mesh);
            return (done, h.next(now));
        }
        if gen != h.gen {
            return (done, None);
        }
        h.advance(now);
        // Less than a byte left is done (the event time was rounded up).
        let mut uncapped = 0;
        h.copies.retain(|c| {
            let over = c.left < 1.0;
            uncapped += u32::from(over && c.cap.is_finite());
            if over && c.stream != u32::MAX {
                done.streams.push(c.stream);
            } else if over {
                done.tasks.push(c.task);
            }
            !over
        });
        h.capped -= uncapped;
        h.share(self.rate, self.mesh);
        (done, h.next(now))
    }
}

impl HostCopies {
    fn advance(&mut self, now: SimTime) {
        let dt = (now.0 - self.last.0) as f64;
        for c in &mut self.copies {
            c.left = (c.left - c.rate * dt).max(0.0);
        }
        self.last = now;
    }

    /// Max-min fair rates: every GPU's send and receive side is a
    /// resource of capacity `rate` (less what failed switch chips took),
    /// and in a mesh each pair's link one of capacity `mesh`; the most
    /// contended resource fixes the rate of the copies through it, and so
    /// on.
    fn share(&mut self, rate: f64, mesh: Option<f64>) {
        let g = self
            .copies
            .iter()
            .flat_map(|c| [c.src, c.dst])
            .filter(|&i| i != SWITCH)
            .map(|i| i as usize + 1)
            .max()
            .unwrap_or(0);
        let ShareScratch {
            cap,
            users,
            fixed,
            now_fixed,
        } = &mut self.scratch;
        // Resources: sending side of GPU i is i, receiving side g + i,
        // and in a mesh the link from i to j 2g + i g + j. A copy to or
        // from the switch uses one side only (`sides`).
        let n = if mesh.is_some() { 2 * g + g * g } else { 2 * g };
        let pair = |c: &Copy| {
            (mesh.is_some() && c.src != SWITCH && c.dst != SWITCH)
                .then(|| 2 * g + c.src as usize * g + c.dst as usize)
        };
        // A switch copy's cap is NVLS's rate with every chip up: failed
        // chips take their share of it too.
        let up = 1.0 - self.lost;
        let cap_of = |c: &Copy| {
            if c.src == SWITCH || c.dst == SWITCH {
                c.cap * up
            } else {
                c.cap
            }
        };
        let sides = |c: &Copy| {
            [
                (c.src != SWITCH).then_some(c.src as usize),
                (c.dst != SWITCH).then(|| g + c.dst as usize),
                pair(c),
            ]
        };
        cap.clear();
        cap.resize(2 * g, rate * (1.0 - self.lost));
        cap.resize(n, mesh.unwrap_or(0.0));
        fixed.clear();
        fixed.resize(self.copies.len(), false);
        loop {
            users.clear();
            users.resize(n, 0);
            for (c, _) in self.copies.iter().zip(fixed.iter()).filter(|(_, f)| !**f) {
                for r in sides(c).into_iter().flatten() {
                    users[r] += 1;
                }
            }
            let capped = if self.capped == 0 {
                f64::INFINITY
            } else {
                self.copies
                    .iter()
                    .zip(fixed.iter())
                    .filter(|(_, f)| !**f)
                    .map(|(c, _)| cap_of(c))
                    .fold(f64::INFINITY, f64::min)
            };
            let best = (0..n)
                .filter(|&r| users[r] > 0)
                .map(|r| cap[r] / users[r] as f64)
                .fold(capped, f64::min);
            if best == f64::INFINITY {
                break;
            }
            let tight = |r: usize| users[r] > 0 && cap[r] / users[r] as f64 <= best * (1.0 + 1e-12);
            now_fixed.clear();
            now_fixed.extend((0..self.copies.len()).filter(|&i| {
                let c = &self.copies[i];
                !fixed[i]
                    && (sides(c).into_iter().flatten().any(tight)
                        || cap_of(c) <= best * (1.0 + 1e-12))
            }));
            for &i in now_fixed.iter() {
                for r in sides(&self.copies[i]).into_iter().flatten() {
                    cap[r] -= best;
                }
                self.copies[i].rate = best;
                fixed[i] = true;
            }
        }
    }

    /// A new generation: events of the earlier ones are stale.
    fn bump(&mut self) {
        self.gen = self.gen.wrapping_add(1);
        if self.gen == RESHARE {
            self.gen = 0;
        }
    }

    fn next(&mut self, now: SimTime) -> Option<(SimTime, u32)> {
        self.bump();
        self.copies
            .iter()
            .filter(|c| c.rate > 0.0)
            .map(|c| (c.left / c.rate).ceil() as u64)
            .min()
            .map(|dt| (now + SimTime(dt), self.gen))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1 byte per ps per direction.
    fn nv() -> Nvlink {
        Nvlink::new(1, 1_000_000_000_000, SimTime::ZERO)
    }

    /// Handles the sharing event several copies starting at an instant
    /// asked for; returns the host's next event.
    fn shared(n: &mut Nvlink, asked: Option<(SimTime, u32)>) -> (SimTime, u32) {
        let (at, gen) = asked.expect("a second start asks for a sharing event");
        assert_eq!(gen, RESHARE);
        let (done, next) = n.on_event(0, gen, at);
        assert!(done.tasks.is_empty() && done.streams.is_empty());
        next.expect("copies in flight")
    }

    #[test]
    fn one_copy_runs_at_the_gpu_rate() {
        let mut n = nv();
        // Alone at its instant: shared at once, no sharing event.
        let (at, gen) = n.add(0, 7, 0, 1, 1000, SimTime::ZERO).unwrap();
        assert_ne!(gen, RESHARE);
        assert_eq!(at, SimTime(1000));
        let (done, next) = n.on_event(0, gen, at);
        assert_eq!(done.tasks, vec![7]);
        assert!(next.is_none());
    }

    /// Two copies out of one GPU share its sending side; a third between
    /// other GPUs is not slowed, and the survivor speeds up.
    #[test]
    fn copies_share_a_gpu_max_min_fairly() {
        let mut n = nv();
        let first = n.add(0, 1, 0, 1, 1000, SimTime::ZERO).unwrap();
        // One sharing event for the instant, once all three are in: the
        // first one's event is stale.
        let asked = n.add(0, 2, 0, 2, 3000, SimTime::ZERO);
        assert_eq!(n.add(0, 3, 3, 4, 1000, SimTime::ZERO), None);
        let (at, gen) = shared(&mut n, asked);
        assert_ne!(gen, first.1);
        assert_eq!(at, SimTime(1000), "copy 3 runs alone at full rate");
        let (done, next) = n.on_event(0, gen, at);
        assert_eq!(done.tasks, vec![3]);
        // Copies 1 and 2 moved 500 each; 1 finishes at 2000.
        let (at, gen) = next.unwrap();
        assert_eq!(at, SimTime(2000));
        let (done, next) = n.on_event(0, gen, at);
        assert_eq!(done.tasks, vec![1]);
        // Copy 2 has 2000 left, alone at full rate.
        assert_eq!(next.unwrap().0, SimTime(4000));
    }

    /// A stream's copies run at most at their cap and leave the rest of
    /// a GPU's rate to the others; they come back as the stream's, not as
    /// tasks.
    #[test]
    fn capped_stream_copies_leave_the_rest_to_others() {
        let mut n = nv();
        // Stream 9: copies 0 -> 1 and 1 -> 2 at most 0.25 byte/ps.
        // Its copies are shared together, at once.
        let stream = n.add_stream(0, 9, &[(0, 1, 500), (1, 2, 500)], 0.25, SimTime::ZERO);
        assert_ne!(stream.unwrap().1, RESHARE);
        // A task's copy out of GPU 0 gets the 0.75 left.
        let asked = n.add(0, 4, 0, 3, 1500, SimTime::ZERO);
        let (at, gen) = shared(&mut n, asked);
        assert_eq!(at, SimTime(2000), "both finish at 2000 ps");
        let (done, next) = n.on_event(0, gen, at);
        assert_eq!(done.tasks, vec![4]);
        assert_eq!(done.streams, vec![9, 9]);
        assert!(next.is_none());
    }

    /// A copy to the switch uses only its sender's side, one from the
    /// switch only its receiver's: GPU 0 sends to the switch at its cap
    /// while GPU 1 receives from it, and a copy 0 -> 1 takes what is
    /// left of both.
    #[test]
    fn switch_copies_use_one_side_of_a_gpu() {
        let mut n = nv();
        let first = n.add_switch(0, 1, (0, true), 500, 0.5, SimTime::ZERO);
        let asked = n.add_switch(0, 2, (1, false), 500, 0.5, SimTime::ZERO);
        assert_ne!(first.unwrap().1, RESHARE);
        assert_eq!(n.add(0, 3, 0, 1, 500, SimTime::ZERO), None);
        let (at, gen) = shared(&mut n, asked);
        // All three at 0.5 byte/ps: each GPU side carries exactly 1.
        assert_eq!(at, SimTime(1000));
        let (mut done, next) = n.on_event(0, gen, at);
        done.tasks.sort_unstable();
        assert_eq!(done.tasks, vec![1, 2, 3]);
        assert!(next.is_none());
        // Alone, a switch copy runs at the GPU's rate when uncapped.
        let (at, _) = n
            .add_switch(0, 4, (2, true), 1000, f64::INFINITY, SimTime(1000))
            .unwrap();
        assert_eq!(at, SimTime(2000));
    }

    /// A stale event (the host changed since) does nothing.
    #[test]
    fn stale_events_are_ignored() {
        let mut n = nv();
        let (_, g1) = n.add(0, 1, 0, 1, 1000, SimTime::ZERO).unwrap();
        assert!(n.add(0, 2, 1, 0, 1000, SimTime(10)).is_some());
        let (done, next) = n.on_event(0, g1, SimTime(1000));
        assert!(done.tasks.is_empty() && next.is_none());
    }
}

//! NCCL's tree all-reduce: the data up and back down the two trees over
//! the positions, chunk by chunk (NCCL gives each channel one tree and its
//! duplicate channel the other; a pass may carry both). Inside a server the GPUs form
//! a chain; across servers the chains' heads form NCCL's double binary
//! tree (`dtree`), so a channel's network traffic leaves and enters every
//! server through one GPU (NCCL's "tree" pattern, which keeps a channel on
//! one rail). With one GPU per server it is the double binary tree alone.

use super::{Base, Pass, Released, Route, Shape};

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Tree {
    /// Each tree's bytes and its chunks (none if it has no
    /// bytes).
    pub(super) per_tree: [u64; 2],
    pub(super) slices: [u32; 2],
    /// Parent and children of each position, per tree.
    pub(super) parent: [Vec<Option<u32>>; 2],
    pub(super) children: [Vec<Vec<u32>>; 2],
    /// Per tree, slice and position: chunks come from children, and
    /// whether its own went up (or, at the root, down).
    pub(super) from_children: Vec<u8>,
    pub(super) went: Vec<bool>,
    /// Per position: reduced chunks it has.
    pub(super) got: Vec<u32>,
    /// The connection of (tree, up or down, position below the edge),
    /// `u32::MAX` for a root, and where each connection is in it.
    pub(super) conn_at: Vec<u32>,
    pub(super) conn_where: Vec<u32>,
}

impl Pass {
    /// A tree all-reduce over `order`, whose positions are grouped by
    /// server (`servers`: how many consecutive positions each server has,
    /// in order), `bytes[t]` going up and down tree t (none on a tree with
    /// none), cut into chunks of `chunk` bytes.
    pub fn tree(
        base: Base,
        servers: &[usize],
        bytes: [u64; 2],
        chunk: u64,
        route: &mut Route,
    ) -> Result<Pass, String> {
        let n = base.order.len();
        debug_assert_eq!(servers.iter().sum::<usize>(), n);
        let parent = nccl_trees(servers);
        let children = parent.clone().map(|par| {
            let mut ch = vec![Vec::new(); n];
            for (p, q) in par.iter().enumerate() {
                if let Some(q) = q {
                    ch[*q as usize].push(p as u32);
                }
            }
            ch
        });
        if children
            .iter()
            .flatten()
            .any(|c| c.len() > usize::from(u8::MAX))
        {
            return Err("a tree node has more children than a pass counts".into());
        }
        let per_tree = bytes;
        let slices = per_tree.map(|h| {
            if h == 0 {
                0
            } else {
                h.div_ceil(chunk.max(1)) as u32
            }
        });
        // Up and down each edge of each tree with bytes: (tree, 0 up or 1
        // down, position below), from and to positions.
        let mut edges = Vec::new();
        for t in (0..2).filter(|&t| per_tree[t] > 0) {
            for (p, q) in parent[t].iter().enumerate() {
                let Some(q) = q.map(|q| q as usize) else {
                    continue;
                };
                edges.push(((t, 0, p), p, q));
                edges.push(((t, 1, p), q, p));
            }
        }
        let mut conn_at = vec![u32::MAX; 4 * n];
        let mut conn_where = Vec::with_capacity(edges.len());
        for (c, &((t, dir, p), _, _)) in edges.iter().enumerate() {
            conn_at[(t * 2 + dir) * n + p] = c as u32;
            conn_where.push(((t * 2 + dir) * n + p) as u32);
        }
        let conns = base.connect(edges.iter().map(|&(_, a, b)| (a, b, base.channel)), route)?;
        let most = slices[0].max(slices[1]) as usize;
        let tree = Tree {
            per_tree,
            slices,
            parent,
            children,
            from_children: vec![0; 2 * most * n],
            went: vec![false; 2 * most * n],
            got: vec![0; n],
            conn_at,
            conn_where,
        };
        Ok(base.into_pass(conns, Shape::Tree(Box::new(tree))))
    }
}

impl Tree {
    pub(super) fn most(&self) -> u64 {
        u64::from(self.slices[0].max(self.slices[1]))
    }

    /// (tree, slice, 0 up or 1 down, tree position) of message `idx`.
    pub(super) fn decode(&self, n: u64, idx: u64) -> (usize, u32, usize, u32) {
        let p = (idx % n) as u32;
        let rest = idx / n;
        let dir = (rest % 2) as usize;
        let rest = rest / 2;
        let slice = (rest % self.most()) as u32;
        ((rest / self.most()) as usize, slice, dir, p)
    }

    pub(super) fn index(&self, n: u64, tree: usize, slice: u32, dir: usize, p: u32) -> u64 {
        (((tree as u64 * self.most() + u64::from(slice)) * 2 + dir as u64) * n) + u64::from(p)
    }

    pub(super) fn tree_of(&self, n: usize, c: u32) -> usize {
        self.conn_where[c as usize] as usize / n / 2
    }

    pub(super) fn cell(&self, n: u32, tree: usize, j: u32, p: u32) -> usize {
        ((tree * self.most() as usize) + j as usize) * n as usize + p as usize
    }

    /// Position `p` sends chunk `j` of `tree` up (or, at the root,
    /// down) once it has entered and has the chunk from all its children.
    pub(super) fn try_up(
        &mut self,
        n: u32,
        tree: usize,
        j: u32,
        p: u32,
        entered: &[bool],
        out: &mut Released,
    ) {
        let c = self.cell(n, tree, j, p);
        if self.went[c]
            || !entered[p as usize]
            || usize::from(self.from_children[c]) < self.children[tree][p as usize].len()
        {
            return;
        }
        self.went[c] = true;
        if self.parent[tree][p as usize].is_some() {
            out.send.push(self.index(u64::from(n), tree, j, 0, p));
        } else {
            // The root has the reduced chunk: down to its children.
            self.got[p as usize] += 1;
            out.done.push(p);
            self.down(n, tree, j, p, out);
        }
    }

    pub(super) fn down(&mut self, n: u32, tree: usize, j: u32, p: u32, out: &mut Released) {
        for &x in &self.children[tree][p as usize] {
            out.send.push(self.index(u64::from(n), tree, j, 1, x));
        }
    }

    pub(super) fn arrive(&mut self, n: u32, idx: u64, entered: &[bool], out: &mut Released) {
        let (tree, j, dir, p) = self.decode(u64::from(n), idx);
        if dir == 0 {
            let Some(q) = self.parent[tree][p as usize] else {
                return;
            };
            let c = self.cell(n, tree, j, q);
            self.from_children[c] += 1;
            self.try_up(n, tree, j, q, entered, out);
        } else {
            self.got[p as usize] += 1;
            out.done.push(p);
            self.down(n, tree, j, p, out);
        }
    }
}

/// Parent of each rank in NCCL's binary tree over ranks 0..n: rank 0 is
/// the root with one child, odd ranks are leaves, and a rank's parent and
/// children follow from its lowest set bit.
pub fn btree(n: usize) -> Vec<Option<u32>> {
    (0..n)
        .map(|rank| {
            if rank == 0 {
                return None;
            }
            let bit = 1usize << rank.trailing_zeros();
            let up = (rank ^ bit) | (bit << 1);
            Some(if up < n { up } else { rank ^ bit } as u32)
        })
        .collect()
}

/// NCCL's double binary tree over `n` ranks: `btree`, and the same tree
/// mirrored (rank r in the place of n - 1 - r) when n is even, or shifted
/// by one rank when n is odd, so that the leaves of one are the inner
/// ranks of the other.
pub fn dtree(n: usize) -> [Vec<Option<u32>>; 2] {
    let first = btree(n);
    let second = (0..n)
        .map(|r| {
            if n.is_multiple_of(2) {
                first[n - 1 - r].map(|u| (n - 1 - u as usize) as u32)
            } else {
                first[(r + n - 1) % n].map(|u| ((u as usize + 1) % n) as u32)
            }
        })
        .collect();
    [first, second]
}

/// Each position's parent in the two trees of NCCL's tree all-reduce over
/// servers of these sizes (consecutive positions): inside a server a
/// chain from its first position (the head) down; the heads linked by
/// `dtree` over the servers.
pub fn nccl_trees(servers: &[usize]) -> [Vec<Option<u32>>; 2] {
    let mut head = Vec::with_capacity(servers.len());
    let mut at = 0u32;
    for &g in servers {
        head.push(at);
        at += g as u32;
    }
    dtree(servers.len()).map(|across| {
        let mut parent = Vec::with_capacity(at as usize);
        for (s, &g) in servers.iter().enumerate() {
            parent.push(across[s].map(|q| head[q as usize]));
            parent.extend((1..g as u32).map(|k| Some(head[s] + k - 1)));
        }
        parent
    })
}

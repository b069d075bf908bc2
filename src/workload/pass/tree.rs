//! NCCL's double binary tree: half the data up and back down each of
//! two binary trees, the second shifted by one position.

use super::{Base, Pass, Released, Route, Shape};
use crate::workload::collective::share;

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Tree {
    /// Each tree's half of the data and its chunks (none if it has no
    /// bytes).
    pub(super) half: [u64; 2],
    pub(super) slices: [u32; 2],
    /// Parent and children of each tree position (position p of tree t is
    /// pass position (p + t) mod n).
    pub(super) parent: Vec<Option<u32>>,
    pub(super) children: Vec<Vec<u32>>,
    /// Per tree, slice and tree position: chunks come from children, and
    /// whether its own went up (or, at the root, down).
    pub(super) from_children: Vec<u8>,
    pub(super) went: Vec<bool>,
    /// Per pass position: reduced chunks it has.
    pub(super) got: Vec<u32>,
    /// The connection of (tree, up or down, tree position), `u32::MAX`
    /// for a root, and where each connection is in it.
    pub(super) conn_at: Vec<u32>,
    pub(super) conn_where: Vec<u32>,
}

impl Pass {
    /// A double binary tree all-reduce of `data` bytes over `order`, each
    /// tree's half cut into chunks of `chunk` bytes.
    pub fn tree(base: Base, data: u64, chunk: u64, route: &mut Route) -> Result<Pass, String> {
        let n = base.order.len();
        let parent = btree(n);
        let mut children = vec![Vec::new(); n];
        for (p, q) in parent.iter().enumerate() {
            if let Some(q) = q {
                children[*q as usize].push(p as u32);
            }
        }
        let half = [share(data, 2, 0), share(data, 2, 1)];
        let slices = half.map(|h| {
            if h == 0 {
                0
            } else {
                h.div_ceil(chunk.max(1)) as u32
            }
        });
        // Up and down each edge of each tree with bytes: (tree, 0 up or 1
        // down, tree position), from and to pass positions.
        let mut edges = Vec::new();
        for t in (0..2).filter(|&t| half[t] > 0) {
            let at = |p: usize| (p + t) % n;
            for (p, q) in parent.iter().enumerate() {
                let Some(q) = q.map(|q| q as usize) else {
                    continue;
                };
                edges.push(((t, 0, p), at(p), at(q)));
                edges.push(((t, 1, p), at(q), at(p)));
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
            half,
            slices,
            parent: parent.clone(),
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

    /// Tree position `p` of `tree` sends chunk `j` up (or, at the root,
    /// down) once it has entered and has it from all its children.
    pub(super) fn try_up(
        &mut self,
        n: u32,
        tree: usize,
        j: u32,
        p: u32,
        entered: &[bool],
        out: &mut Released,
    ) {
        let pos = (p as usize + tree) % n as usize;
        let c = self.cell(n, tree, j, p);
        if self.went[c]
            || !entered[pos]
            || usize::from(self.from_children[c]) < self.children[p as usize].len()
        {
            return;
        }
        self.went[c] = true;
        if self.parent[p as usize].is_some() {
            out.send.push(self.index(u64::from(n), tree, j, 0, p));
        } else {
            // The root has the reduced chunk: down to its children.
            self.got[pos] += 1;
            out.done.push(pos as u32);
            self.down(n, tree, j, p, out);
        }
    }

    pub(super) fn down(&mut self, n: u32, tree: usize, j: u32, p: u32, out: &mut Released) {
        for &x in &self.children[p as usize] {
            out.send.push(self.index(u64::from(n), tree, j, 1, x));
        }
    }

    pub(super) fn arrive(&mut self, n: u32, idx: u64, entered: &[bool], out: &mut Released) {
        let (tree, j, dir, p) = self.decode(u64::from(n), idx);
        if dir == 0 {
            let Some(q) = self.parent[p as usize] else {
                return;
            };
            let c = self.cell(n, tree, j, q);
            self.from_children[c] += 1;
            self.try_up(n, tree, j, q, entered, out);
        } else {
            let pos = (p as usize + tree) % n as usize;
            self.got[pos] += 1;
            out.done.push(pos as u32);
            self.down(n, tree, j, p, out);
        }
    }
}

/// Parent of each position in a balanced binary tree over positions
/// 0..n whose leaves are the even positions: each range's root is its
/// position p with the largest lowest set bit of p + 1.
pub fn btree(n: usize) -> Vec<Option<u32>> {
    pub(super) fn build(lo: usize, hi: usize, up: Option<u32>, parent: &mut [Option<u32>]) {
        if lo >= hi {
            return;
        }
        let root = (lo..hi)
            .max_by_key(|&p| ((p + 1).trailing_zeros(), std::cmp::Reverse(p)))
            .unwrap_or(lo);
        parent[root] = up;
        build(lo, root, Some(root as u32), parent);
        build(root + 1, hi, Some(root as u32), parent);
    }
    let mut parent = vec![None; n];
    build(0, n, None, &mut parent);
    parent
}

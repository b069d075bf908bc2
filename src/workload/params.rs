//! The parameters one rank of a Megatron-Core GPT model holds, in the
//! order Megatron-Core registers them, and the gradient buckets its
//! data parallelism lays them into.
//!
//! Order (Megatron-Core's `GPTModel` with the Transformer Engine layer
//! spec): the word embeddings (and learned position embeddings) on the
//! first stage; per layer the attention's output projection
//! (`linear_proj`) then its fused norm and QKV projection
//! (`linear_qkv`: norm weight and bias, weight, bias); then the MLP's
//! fused norm and first matrix (`linear_fc1`) and its second
//! (`linear_fc2`), or with experts the pre-MLP norm, the router and the
//! local experts' matrices; on the last stage the final norm and the
//! output layer.
//!
//! Buckets (`distributed/param_and_grad_buffer.py` and, with the
//! distributed optimizer, `optimizer/distrib_optimizer.py` and
//! `optimizer/param_layout.py`): parameters are taken in reverse (the
//! backward's order), one buffer for those reduced over the whole DP
//! group and one for the experts'; a bucket closes after the parameter
//! that brings it to at least the bucket size. With the distributed
//! optimizer every parameter starts on a 64-element boundary, a bucket
//! ends on a multiple of lcm(dp, 128) elements, and a tied embedding
//! copy gets a bucket of its own.

/// The model's shape, as the parameter list needs it.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub hidden: u64,
    /// Width of the keys and values (grouped-query attention).
    pub kv_hidden: u64,
    pub ffn: u64,
    /// Matrices of an MLP: 3 gated, 2 not.
    pub mats: u64,
    pub experts: u64,
    pub expert_ffn: u64,
    /// The shared experts' FFN width (0: none).
    pub shared_ffn: u64,
    pub vocab: u64,
    pub layernorm: bool,
    pub bias: bool,
    pub tied: bool,
    pub positions: u64,
}

/// When a gradient is ready in the backward: after the LM head's
/// backward, a layer's MLP or attention part (by its place in the
/// stage), or the embedding's, last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ready {
    Head,
    /// Layer `i` of the stage counted from its last (the backward's
    /// order): its MLP (false) or attention (true) part.
    Layer(u64, bool),
    Embedding,
}

/// One parameter tensor of a rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param {
    /// Elements on this rank (its TP share).
    pub numel: u64,
    /// Reduced over the experts' DP group, not the whole DP group.
    pub expert: bool,
    /// A tied word embedding held on two stages (Megatron-Core's
    /// `shared_embedding`).
    pub shared: bool,
    /// Carried by sequence parallelism (norms, row-parallel biases): its
    /// gradient is all-reduced over the TP group after the DP sync.
    pub sequence: bool,
    pub ready: Ready,
}

/// What a stage holds.
#[derive(Clone, Copy, Debug)]
pub struct Stage {
    pub tp: u64,
    pub ep: u64,
    pub pp: u64,
    pub index: u64,
    pub layers: u64,
}

fn param(numel: u64, ready: Ready) -> Param {
    Param {
        numel,
        expert: false,
        shared: false,
        sequence: false,
        ready,
    }
}

/// A norm's parameters: a weight, and a bias for LayerNorm.
fn norm(m: &Shape, ready: Ready, out: &mut Vec<Param>) {
    for _ in 0..if m.layernorm { 2 } else { 1 } {
        out.push(Param {
            sequence: true,
            ..param(m.hidden, ready)
        });
    }
}

/// A linear layer's weight (its TP share) and bias (`split`: the bias is
/// split too, as a column-parallel layer's is; a row-parallel layer's
/// bias is whole and carried by sequence parallelism).
fn linear(m: &Shape, weight: u64, bias: u64, split: bool, ready: Ready) -> [Option<Param>; 2] {
    let b = m.bias.then_some(Param {
        sequence: !split,
        ..param(bias, ready)
    });
    [Some(param(weight, ready)), b]
}

/// The parameters of one stage's rank, in Megatron-Core's order.
pub fn stage_params(m: &Shape, st: Stage) -> Vec<Param> {
    let (h, tp) = (m.hidden, st.tp);
    let mut out = Vec::new();
    let first = st.index == 0;
    let last = st.index + 1 == st.pp;
    let tied_copy = m.tied && st.pp > 1;
    if first {
        out.push(Param {
            shared: tied_copy,
            ..param(m.vocab / tp * h, Ready::Embedding)
        });
        if m.positions > 0 {
            out.push(param(m.positions * h, Ready::Embedding));
        }
    }
    let qkv = (h + 2 * m.kv_hidden) / tp;
    for l in 0..st.layers {
        let back = st.layers - 1 - l;
        let attn = Ready::Layer(back, true);
        let mlp = Ready::Layer(back, false);
        out.extend(linear(m, h * h / tp, h, false, attn).into_iter().flatten());
        norm(m, attn, &mut out);
        out.extend(linear(m, qkv * h, qkv, true, attn).into_iter().flatten());
        if m.experts == 0 {
            let up = (m.mats - 1) * m.ffn / tp;
            norm(m, mlp, &mut out);
            out.extend(linear(m, up * h, up, true, mlp).into_iter().flatten());
            let down = linear(m, h * m.ffn / tp, h, false, mlp);
            out.extend(down.into_iter().flatten());
        } else {
            norm(m, mlp, &mut out);
            // The router, carried by sequence parallelism.
            out.push(Param {
                sequence: true,
                ..param(m.experts * h, mlp)
            });
            let f = m.expert_ffn / tp;
            let up = (m.mats - 1) * f;
            // The local experts' first matrices, then their second ones.
            for (weight, bias) in [(up * h, up), (h * f, h)] {
                for _ in 0..m.experts / st.ep {
                    for numel in [Some(weight), m.bias.then_some(bias)].into_iter().flatten() {
                        out.push(Param {
                            expert: true,
                            ..param(numel, mlp)
                        });
                    }
                }
            }
            // The shared experts (`SharedExpertMLP`): a dense MLP on
            // every token, reduced over the whole DP group.
            if m.shared_ffn > 0 {
                let up = (m.mats - 1) * m.shared_ffn / tp;
                out.extend(linear(m, up * h, up, true, mlp).into_iter().flatten());
                let down = linear(m, h * m.shared_ffn / tp, h, false, mlp);
                out.extend(down.into_iter().flatten());
            }
        }
    }
    if last {
        norm(m, Ready::Head, &mut out);
        if !m.tied || st.pp > 1 {
            out.push(Param {
                shared: tied_copy,
                ..param(m.vocab / tp * h, Ready::Head)
            });
        }
    }
    out
}

/// A bucket of gradients: its elements (padded as the distributed
/// optimizer pads them) and when its last gradient is ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bucket {
    pub numel: u64,
    /// When its first and its last gradient are ready.
    pub first: Ready,
    pub ready: Ready,
}

impl Bucket {
    /// Whether it holds parameters of the part of the backward at `at`.
    pub fn holds(&self, at: Ready) -> bool {
        self.first <= at && at <= self.ready
    }
}

fn round_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The buckets of one buffer (`expert`: the experts' or the rest), in the
/// backward's order. `size`: elements per bucket (`None`: one bucket);
/// `distributed`: the DP size the distributed optimizer shards over.
pub fn buckets(
    params: &[Param],
    expert: bool,
    size: Option<u64>,
    distributed: Option<u64>,
) -> Vec<Bucket> {
    let mut out = Vec::new();
    let end_to = distributed.map(|dp| dp / gcd(dp, 128) * 128);
    let mut first = Ready::Head;
    let close = |start: u64, end: u64, first: Ready, ready: Ready, out: &mut Vec<Bucket>| {
        let end = end_to.map_or(end, |d| round_up(end, d));
        out.push(Bucket {
            numel: end - start,
            first,
            ready,
        });
        end
    };
    let (mut start, mut at) = (0u64, 0u64);
    let mut open: Option<Ready> = None;
    for p in params.iter().rev().filter(|p| p.expert == expert) {
        if distributed.is_some() {
            at = round_up(at, 64);
            // A tied embedding copy starts a bucket of its own.
            if p.shared {
                if let Some(r) = open.take() {
                    start = close(start, at, first, r, &mut out);
                    at = start;
                }
            }
        }
        let end = at + p.numel;
        if open.is_none() {
            first = p.ready;
        }
        open = Some(p.ready);
        if size.is_some_and(|s| end - start >= s) || (distributed.is_some() && p.shared) {
            start = close(start, end, first, p.ready, &mut out);
            at = start;
            open = None;
        } else {
            at = end;
        }
    }
    if let Some(r) = open {
        close(start, at, first, r, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(numel: u64, shared: bool) -> Param {
        Param {
            shared,
            ..param(numel, Ready::Head)
        }
    }

    /// Without the distributed optimizer a bucket closes on the parameter
    /// that fills it, unpadded; with it, parameters start on 64 elements
    /// and a bucket ends on lcm(dp, 128), and a shared embedding is alone.
    #[test]
    fn buckets_close_as_megatron_core_closes_them() {
        // Backward order: 30, 50, 10, 100.
        let ps = [p(100, false), p(10, false), p(50, false), p(30, false)];
        let b: Vec<u64> = buckets(&ps, false, Some(60), None)
            .iter()
            .map(|b| b.numel)
            .collect();
        assert_eq!(b, [80, 110]);
        assert_eq!(buckets(&ps, false, None, None)[0].numel, 190);
        // 30 -> [0, 30); 50 -> [64, 114): 114 >= 60 closes, padded to 384
        // (lcm(3, 128)); 10 -> [384, 394); 100 -> [448, 548): 164 >= 60
        // closes, padded to 768.
        let b: Vec<u64> = buckets(&ps, false, Some(60), Some(3))
            .iter()
            .map(|b| b.numel)
            .collect();
        assert_eq!(b, [384, 384]);
        let ps = [p(100, true), p(10, false)];
        let b: Vec<u64> = buckets(&ps, false, None, Some(2))
            .iter()
            .map(|b| b.numel)
            .collect();
        assert_eq!(b, [128, 128]);
    }
}

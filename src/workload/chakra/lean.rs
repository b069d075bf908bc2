//! The fields of a node the run uses, read straight from its message's
//! bytes: no allocation for its name, its attributes' names or their
//! values. Where it gives a node, it is exactly what `decode_node` (with
//! `prost`) gives: protobuf's rules for fields that appear more than once
//! (the last scalar wins, repeated fields append, a message field
//! merges), packed and unpacked repeated numbers, unknown fields and
//! groups skipped. It refuses (`None`) at least all that `prost` refuses:
//! varints past ten bytes or past 64 bits, keys past 32 bits, tag 0,
//! wire types 6 and 7 or not the field's own, strings that are not
//! UTF-8, lengths past the end, groups that do not close or nest deeper
//! than `DEPTH` (`prost` allows 100), and, where a METADATA node's groups
//! do not parse, what `decode_node` refuses. So the first read of a trace
//! uses it and asks `prost` only where it refuses, for the error or for
//! the node (`decode_node_fast`); the windows, reading bytes that read
//! once already, report a refusal as a file changed under the run.

use super::{process_groups, Comm, Kind, Raw};
use crate::units::SimTime;

/// How deep groups in unknown fields may nest.
const DEPTH: u32 = 32;

/// A reader over a message's bytes.
struct Bytes<'a>(&'a [u8]);

impl<'a> Bytes<'a> {
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for (i, &b) in self.0.iter().enumerate().take(10) {
            v |= u64::from(b & 0x7f) << (7 * i as u32);
            if b & 0x80 == 0 {
                if i == 9 && b > 1 {
                    return None;
                }
                self.0 = &self.0[i + 1..];
                return Some(v);
            }
        }
        None
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.0.len() {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn delimited(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.varint()?).ok()?;
        self.take(n)
    }

    fn fixed<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    /// The next field's number and wire type, if any is left.
    fn key(&mut self) -> Option<Option<(u64, u8)>> {
        if self.0.is_empty() {
            return Some(None);
        }
        let k = self.varint()?;
        let (field, wire) = (k >> 3, (k & 7) as u8);
        if k > u64::from(u32::MAX) || field == 0 || wire > 5 {
            return None;
        }
        Some(Some((field, wire)))
    }

    /// Skips a field of this wire type (a group up to its end, `depth`
    /// groups deep).
    fn skip(&mut self, field: u64, wire: u8, depth: u32) -> Option<()> {
        match wire {
            0 => self.varint().map(drop),
            1 => self.take(8).map(drop),
            2 => self.delimited().map(drop),
            5 => self.take(4).map(drop),
            3 if depth < DEPTH => loop {
                let (f, w) = self.key()??;
                if w == 4 {
                    return (f == field).then_some(());
                }
                self.skip(f, w, depth + 1)?;
            },
            _ => None,
        }
    }

    /// A string field's bytes, if they are UTF-8.
    fn string(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.delimited()?).ok()
    }
}

/// An attribute's value, as `int_of` and `pg_name` read it.
#[derive(Clone, Copy)]
enum Value<'a> {
    Int(Option<i64>),
    Str(&'a str),
    /// A float, a double or bytes: no integer, and no name.
    Other,
}

impl<'a> Value<'a> {
    /// The value of oneof field `tag` of wire type `wire`.
    fn read(tag: u64, wire: u8, b: &mut Bytes<'a>) -> Option<Value<'a>> {
        let signed = |v: u64| -> i64 { (v >> 1) as i64 ^ -((v & 1) as i64) };
        let signed32 = |v: u32| -> i64 { i64::from((v >> 1) as i32 ^ -((v & 1) as i32)) };
        Some(match (tag, wire) {
            (3, 1) => b.take(8).map(|_| Value::Other)?,
            (5, 5) => b.take(4).map(|_| Value::Other)?,
            (7, 0) => Value::Int(Some(i64::from(b.varint()? as i32))),
            (9, 0) => Value::Int(Some(b.varint()? as i64)),
            (11, 0) => Value::Int(Some(i64::from(b.varint()? as u32))),
            (13, 0) => Value::Int(i64::try_from(b.varint()?).ok()),
            (15, 0) => Value::Int(Some(signed32(b.varint()? as u32))),
            (17, 0) => Value::Int(Some(signed(b.varint()?))),
            (19, 5) => Value::Int(Some(i64::from(u32::from_le_bytes(b.fixed()?)))),
            (21, 1) => Value::Int(i64::try_from(u64::from_le_bytes(b.fixed()?)).ok()),
            (23, 5) => Value::Int(Some(i64::from(i32::from_le_bytes(b.fixed()?)))),
            (25, 1) => Value::Int(Some(i64::from_le_bytes(b.fixed()?))),
            (27, 0) => Value::Int(Some(i64::from(b.varint()? != 0))),
            (29, 2) => Value::Str(b.string()?),
            (31, 2) => b.delimited().map(|_| Value::Other)?,
            _ => return None,
        })
    }

    fn int(self) -> Option<i64> {
        match self {
            Value::Int(v) => v,
            _ => None,
        }
    }
}

/// The attributes the run reads, in the order of `Attrs::seen`.
const NAMES: [&str; 7] = [
    "comm_type",
    "comm_size",
    "comm_src",
    "comm_dst",
    "comm_tag",
    "pg_name",
    "is_cpu_op",
];

/// The first attribute of each name in `NAMES` (as `decode_node` finds
/// them): `Some(None)` for one without a value.
#[derive(Default)]
struct Attrs<'a> {
    seen: [Option<Option<Value<'a>>>; NAMES.len()],
}

impl<'a> Attrs<'a> {
    fn add(&mut self, msg: &'a [u8]) -> Option<()> {
        let mut b = Bytes(msg);
        let (mut name, mut value) = ("", None);
        while let Some((f, w)) = b.key()? {
            match (f, w) {
                (1, 2) => name = b.string()?,
                (1, _) => return None,
                (3..=31, _) if f % 2 == 1 => value = Some(Value::read(f, w, &mut b)?),
                _ => b.skip(f, w, 0)?,
            }
        }
        if let Some(k) = NAMES.iter().position(|&n| n == name) {
            self.seen[k].get_or_insert(value);
        }
        Some(())
    }

    fn int(&self, k: usize) -> Option<i64> {
        self.seen[k].flatten().and_then(Value::int)
    }
}

/// The node a message holds, as `decode_node` gives it.
pub(super) fn node(msg: &[u8]) -> Option<Raw> {
    let mut b = Bytes(msg);
    let (mut id, mut kind, mut duration) = (0u64, 0i32, 0u64);
    let (mut data, mut ctrl) = (Vec::new(), Vec::new());
    let mut inputs: Option<&str> = None;
    let mut attrs = Attrs::default();
    while let Some((f, w)) = b.key()? {
        match (f, w) {
            (1, 0) => id = b.varint()?,
            (3, 0) => kind = b.varint()? as i32,
            (7, 0) => duration = b.varint()?,
            (4 | 5, 0) => {
                let v = b.varint()?;
                if f == 5 { &mut data } else { &mut ctrl }.push(v);
            }
            (4 | 5, 2) => {
                let mut packed = Bytes(b.delimited()?);
                let to = if f == 5 { &mut data } else { &mut ctrl };
                while !packed.0.is_empty() {
                    to.push(packed.varint()?);
                }
            }
            (8, 2) => {
                // A message field seen twice merges: its string keeps the
                // last value given.
                let mut io = Bytes(b.delimited()?);
                let values = inputs.get_or_insert("");
                while let Some((f, w)) = io.key()? {
                    match (f, w) {
                        (1, 2) => *values = io.string()?,
                        (1, _) => return None,
                        _ => io.skip(f, w, 0)?,
                    }
                }
            }
            (10, 2) => attrs.add(b.delimited()?)?,
            (2, 2) => drop(b.string()?),
            (6, 0) => drop(b.varint()?),
            (9 | 11.., _) => b.skip(f, w, 0)?,
            _ => return None,
        }
    }
    let kind = Kind::of(kind);
    let defines = match (inputs, kind) {
        (Some(v), Kind::Metadata) => process_groups(v).ok()?,
        _ => Vec::new(),
    };
    let pg_name = attrs.seen[5].flatten().map(|v| match v {
        Value::Str(s) => s.to_string(),
        other => other.int().map_or_else(String::new, |i| i.to_string()),
    });
    // Past the limit: `prost`'s reader says so.
    if duration > super::MAX_DURATION_US {
        return None;
    }
    data.extend(ctrl);
    Some(Raw {
        id,
        kind,
        cpu: attrs.int(6).unwrap_or(0) != 0,
        duration: SimTime::from_us(duration),
        deps: data,
        comm: Comm {
            comm_type: attrs.int(0),
            comm_size: attrs.int(1).and_then(|s| u64::try_from(s).ok()),
            comm_src: attrs.int(2),
            comm_dst: attrs.int(3),
            comm_tag: attrs.int(4).unwrap_or(0),
            pg_name,
            defines,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::super::{decode_node, decode_node_fast, pb};
    use super::*;
    use prost::Message;
    use rand_pcg::rand_core::RngCore;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    /// A random node message: fields of every kind the reader meets,
    /// some given twice (two encodings one after the other merge),
    /// dependencies packed and unpacked, unknown fields and groups.
    fn random_message(rng: &mut rand_pcg::Pcg64Mcg) -> Vec<u8> {
        let mut pick = |n: u64| rng.next_u64() % n;
        let mut out = Vec::new();
        for _ in 0..1 + pick(3) {
            let int = |x: u64| match x % 4 {
                0 => x % 8,
                1 => x,
                2 => u64::MAX - x % 3,
                _ => 1 << (x % 64),
            };
            let value = |k: u64, x: u64| {
                use pb::Value::*;
                match k {
                    0 => Double(x as f64),
                    1 => Float(x as f32),
                    2 => Int32(int(x) as i32),
                    3 => Int64(int(x) as i64),
                    4 => Uint32(int(x) as u32),
                    5 => Uint64(int(x)),
                    6 => Sint32(int(x) as i32),
                    7 => Sint64(int(x) as i64),
                    8 => Fixed32(int(x) as u32),
                    9 => Fixed64(int(x)),
                    10 => Sfixed32(int(x) as i32),
                    11 => Sfixed64(int(x) as i64),
                    12 => Bool(x % 2 == 1),
                    13 => String(["", "0", "7", "tp", "dp-1"][(x % 5) as usize].into()),
                    _ => Bytes(vec![x as u8; (x % 3) as usize]),
                }
            };
            let names: Vec<&str> = NAMES.iter().copied().chain(["other", ""]).collect();
            let attr = (0..pick(7))
                .map(|_| pb::Attribute {
                    name: names[pick(names.len() as u64) as usize].into(),
                    value: match pick(16) {
                        15 => None,
                        k => Some(value(k, pick(1 << 20) * pick(1 << 40))),
                    },
                })
                .collect();
            let deps = |n: u64| (0..n).map(|i| i * 3 + n).collect::<Vec<u64>>();
            let inputs = match pick(4) {
                0 => None,
                1 => Some(pb::IoInfo {
                    values: r#"[{"pg_name": "tp", "ranks": [0, 1]}]"#.into(),
                }),
                2 => Some(pb::IoInfo {
                    values: "not json".into(),
                }),
                _ => Some(pb::IoInfo::default()),
            };
            pb::Node {
                id: int(pick(1 << 40)),
                name: "n".repeat(pick(4) as usize),
                r#type: pick(10) as i32 - 1,
                ctrl_deps: deps(pick(4)),
                data_deps: deps(pick(4)),
                start_time_micros: pick(1000),
                // Mostly within what a node may take, now and then far
                // past it.
                duration_micros: match pick(8) {
                    0 => int(pick(1 << 30)),
                    _ => pick(1 << 40),
                },
                inputs,
                attr,
            }
            .encode(&mut out)
            .unwrap();
            // Unpacked dependencies, unknown fields and a group.
            for _ in 0..pick(3) {
                match pick(5) {
                    0 | 1 => {
                        varint(if pick(2) == 0 { 4 << 3 } else { 5 << 3 }, &mut out);
                        varint(pick(1 << 50), &mut out);
                    }
                    2 => {
                        varint(9 << 3, &mut out);
                        varint(pick(300), &mut out);
                    }
                    3 => {
                        varint(12 << 3 | 2, &mut out);
                        varint(2, &mut out);
                        out.extend([1, 2]);
                    }
                    _ => {
                        varint(14 << 3 | 3, &mut out);
                        varint(1 << 3 | 5, &mut out);
                        out.extend([0, 0, 0, 0]);
                        varint(14 << 3 | 4, &mut out);
                    }
                }
            }
        }
        out
    }

    /// On the messages made here, which `prost` accepts, the reader gives
    /// what `decode_node` gives; on the same cut short or with bytes
    /// changed, it refuses or gives what `decode_node` gives, never a
    /// node where `prost` refuses.
    #[test]
    fn reads_what_prost_decodes_and_refuses_what_it_refuses() {
        let mut rng = rand_pcg::Pcg64Mcg::new(0x1ea0);
        let (mut read, mut refused) = (0, 0);
        for _ in 0..20_000 {
            let whole = random_message(&mut rng);
            // prost decodes what prost encodes; a node that runs too
            // long is refused, by both readers.
            let want = match decode_node(&whole, 1) {
                Ok(want) => want,
                Err(e) => {
                    assert!(e.contains("a node may take"), "{e}");
                    assert_eq!(node(&whole), None);
                    continue;
                }
            };
            assert_eq!(node(&whole).as_ref(), Some(&want), "{whole:?}");
            let cut = (rng.next_u64() % (whole.len() as u64 + 1)) as usize;
            let mut changed = whole.clone();
            for _ in 0..1 + rng.next_u64() % 3 {
                let at = (rng.next_u64() % whole.len().max(1) as u64) as usize;
                if let Some(b) = changed.get_mut(at) {
                    *b = match rng.next_u64() % 4 {
                        0 => 0xff,
                        1 => 0x80,
                        2 => *b ^ 1 << (rng.next_u64() % 8),
                        _ => rng.next_u64() as u8,
                    };
                }
            }
            for msg in [&whole[..cut], &changed[..]] {
                match (node(msg), decode_node(msg, 1)) {
                    (Some(got), Ok(want)) => {
                        assert_eq!(got, want, "{msg:?}");
                        read += 1;
                    }
                    (Some(got), Err(e)) => panic!("{msg:?}: read {got:?}, prost: {e}"),
                    (None, _) => refused += 1,
                }
            }
        }
        assert!(
            read > 5_000 && refused > 5_000,
            "{read} read, {refused} refused"
        );
    }

    /// Groups in unknown fields are skipped, to a depth.
    #[test]
    fn skips_groups_to_a_depth() {
        let mut msg = pb::Node {
            id: 5,
            r#type: 4,
            ..pb::Node::default()
        }
        .encode_to_vec();
        let nested = |depth: u64| {
            let mut g = Vec::new();
            for _ in 0..depth {
                varint(14 << 3 | 3, &mut g);
            }
            for _ in 0..depth {
                varint(14 << 3 | 4, &mut g);
            }
            g
        };
        let shallow = [&msg[..], &nested(DEPTH as u64)].concat();
        assert_eq!(node(&shallow).map(|n| n.id), Some(5));
        // Deeper, `prost` decides (it allows 100).
        msg.extend(nested(DEPTH as u64 + 1));
        assert!(node(&msg).is_none());
        assert_eq!(decode_node_fast(&msg, 1).map(|n| n.id), Ok(5));
        // A group that does not close.
        assert!(node(&nested(3)[..3]).is_none());
    }

    /// Fields the run reads are found whichever way they are written.
    #[test]
    fn reads_the_fields_of_a_collective() {
        let msg = pb::Node {
            id: 42,
            r#type: 7,
            data_deps: vec![3, 1],
            ctrl_deps: vec![2],
            duration_micros: 5,
            attr: vec![
                pb::Attribute {
                    name: "comm_type".into(),
                    value: Some(pb::Value::Int64(2)),
                },
                pb::Attribute {
                    name: "comm_size".into(),
                    value: Some(pb::Value::Uint64(1 << 20)),
                },
                pb::Attribute {
                    name: "pg_name".into(),
                    value: Some(pb::Value::String("dp".into())),
                },
                // Only the first attribute of a name counts.
                pb::Attribute {
                    name: "comm_type".into(),
                    value: Some(pb::Value::Int64(0)),
                },
            ],
            ..pb::Node::default()
        }
        .encode_to_vec();
        let raw = node(&msg).unwrap();
        assert_eq!(
            (raw.id, raw.kind, &raw.deps[..]),
            (42, Kind::Coll, &[3, 1, 2][..])
        );
        assert_eq!(raw.duration, SimTime::from_us(5));
        assert_eq!(
            (raw.comm.comm_type, raw.comm.comm_size, raw.comm.pg_name),
            (Some(2), Some(1 << 20), Some("dp".to_string()))
        );
        // Cut short, it is not a message.
        assert!(node(&msg[..msg.len() - 1]).is_none());
    }
}

//! ECMP hash functions and the header fields they cover.
//!
//! Switch ASICs hash a configurable subset of the packet header with a CRC
//! polynomial and a per-device seed. Offered here: CRC-32 (IEEE 802.3),
//! CRC-32C (Castagnoli), CRC-16/CCITT-FALSE and CRC-16/ARC (IBM). The seed
//! is the CRC's initial value. Fields are serialized in a fixed order:
//! source IP, destination IP, IP protocol, UDP source port, UDP destination
//! port, BTH destination QP (24 bits), VLAN ID (the rail's VLAN where
//! rails are separate VLANs, 0 for untagged frames; 16 bits). There is no
//! overlay, so no VXLAN VNI to hash.

use crc::{Crc, Table, CRC_16_ARC, CRC_16_IBM_3740, CRC_32_ISCSI, CRC_32_ISO_HDLC};

use crate::topology::{nic_ip, QpId};
use crate::wire::frame::{IP_PROTO_UDP, ROCEV2_UDP_PORT};
use crate::wire::Packet;

// Slice-by-16 tables: the keys are 5 to 16 bytes, hashed at every hop.
static CRC32: Crc<u32, Table<16>> = Crc::<u32, Table<16>>::new(&CRC_32_ISO_HDLC);
static CRC32C: Crc<u32, Table<16>> = Crc::<u32, Table<16>>::new(&CRC_32_ISCSI);
static CRC16_CCITT: Crc<u16, Table<16>> = Crc::<u16, Table<16>>::new(&CRC_16_IBM_3740);
static CRC16_ARC: Crc<u16, Table<16>> = Crc::<u16, Table<16>>::new(&CRC_16_ARC);

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum HashFn {
    Crc32,
    Crc32c,
    Crc16Ccitt,
    Crc16Arc,
}

impl HashFn {
    pub const NAMES: &'static [&'static str] = &["crc32", "crc32c", "crc16-ccitt", "crc16-arc"];

    pub fn from_name(s: &str) -> Option<HashFn> {
        Some(match s {
            "crc32" => HashFn::Crc32,
            "crc32c" => HashFn::Crc32c,
            "crc16-ccitt" => HashFn::Crc16Ccitt,
            "crc16-arc" => HashFn::Crc16Arc,
            _ => return None,
        })
    }

    /// What seeding adds to the CRC of a `len`-byte key: since a CRC is
    /// affine over GF(2), `hash(seed, k) == hash(0, k) ^ seed_term(seed,
    /// k.len())` for every key `k`.
    pub fn seed_term(self, seed: u32, len: usize) -> u32 {
        let zeros = [0u8; KEY_MAX];
        self.hash(seed, &zeros[..len]) ^ self.hash(0, &zeros[..len])
    }

    #[inline]
    pub fn hash(self, seed: u32, bytes: &[u8]) -> u32 {
        match self {
            HashFn::Crc32 => {
                let mut d = CRC32.digest_with_initial(seed);
                d.update(bytes);
                d.finalize()
            }
            HashFn::Crc32c => {
                let mut d = CRC32C.digest_with_initial(seed);
                d.update(bytes);
                d.finalize()
            }
            HashFn::Crc16Ccitt => {
                let mut d = CRC16_CCITT.digest_with_initial(seed as u16);
                d.update(bytes);
                d.finalize() as u32
            }
            HashFn::Crc16Arc => {
                let mut d = CRC16_ARC.digest_with_initial(seed as u16);
                d.update(bytes);
                d.finalize() as u32
            }
        }
    }
}

/// The longest key: every field selected.
pub const KEY_MAX: usize = 18;

/// A set of header fields, as a bit mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HashFields(u8);

impl HashFields {
    pub const NONE: HashFields = HashFields(0);
    pub const SRC_IP: HashFields = HashFields(1);
    pub const DST_IP: HashFields = HashFields(2);
    pub const PROTOCOL: HashFields = HashFields(4);
    pub const UDP_SPORT: HashFields = HashFields(8);
    pub const UDP_DPORT: HashFields = HashFields(16);
    pub const DST_QP: HashFields = HashFields(32);
    pub const VLAN: HashFields = HashFields(128);
    /// The classic 5-tuple, the default.
    pub const FIVE_TUPLE: HashFields = HashFields(1 | 2 | 4 | 8 | 16);
    /// Symmetric hashing: the two addresses (and the two ports) are put in
    /// the key in sorted order, so a flow and its reverse hash alike.
    pub const SYMMETRIC: HashFields = HashFields(64);

    pub const NAMES: &'static [&'static str] = &[
        "src_ip",
        "dst_ip",
        "protocol",
        "udp_sport",
        "udp_dport",
        "dst_qp",
        "vlan",
    ];

    pub fn from_name(s: &str) -> Option<HashFields> {
        Some(match s {
            "vlan" => Self::VLAN,
            _ => HashFields(1 << Self::NAMES[..6].iter().position(|n| *n == s)?),
        })
    }

    pub fn with(self, other: HashFields) -> HashFields {
        HashFields(self.0 | other.0)
    }

    #[inline]
    pub fn has(self, other: HashFields) -> bool {
        self.0 & other.0 != 0
    }

    /// Bytes the selected fields take.
    pub fn key_len(self) -> usize {
        let fixed: usize = [4, 4, 1, 2, 2, 3]
            .iter()
            .enumerate()
            .filter(|(i, _)| self.0 & (1 << i) != 0)
            .map(|(_, n)| n)
            .sum();
        fixed + if self.has(Self::VLAN) { 2 } else { 0 }
    }

    /// Serializes the selected fields of `pkt`, whose frame carries VLAN
    /// ID `vlan`, into `buf`; returns the length used.
    #[inline]
    pub fn key(self, pkt: &Packet, vlan: u16, buf: &mut [u8; KEY_MAX]) -> usize {
        let mut n = 0;
        let mut put = |b: &[u8]| {
            buf[n..n + b.len()].copy_from_slice(b);
            n += b.len();
        };
        let (mut src, mut dst) = (nic_ip(pkt.src), nic_ip(pkt.dst));
        let (mut sport, mut dport) = (pkt.udp_sport, ROCEV2_UDP_PORT);
        if self.has(Self::SYMMETRIC) {
            (src, dst) = (src.min(dst), src.max(dst));
            (sport, dport) = (sport.min(dport), sport.max(dport));
        }
        if self.has(Self::SRC_IP) {
            put(&src.to_be_bytes());
        }
        if self.has(Self::DST_IP) {
            put(&dst.to_be_bytes());
        }
        if self.has(Self::PROTOCOL) {
            put(&[IP_PROTO_UDP]);
        }
        if self.has(Self::UDP_SPORT) {
            put(&sport.to_be_bytes());
        }
        if self.has(Self::UDP_DPORT) {
            put(&dport.to_be_bytes());
        }
        if self.has(Self::DST_QP) {
            put(&qpn(pkt.qp).to_be_bytes()[1..]);
        }
        if self.has(Self::VLAN) {
            put(&vlan.to_be_bytes());
        }
        n
    }
}

/// The 24-bit QP number a QP carries in the BTH.
pub fn qpn(qp: QpId) -> u32 {
    (0x100 + qp.0) & 0x00FF_FFFF
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_check_values() {
        // The catalogue check value of each CRC over "123456789" with the
        // standard initial value.
        assert_eq!(HashFn::Crc32.hash(0xFFFF_FFFF, b"123456789"), 0xCBF4_3926);
        assert_eq!(HashFn::Crc32c.hash(0xFFFF_FFFF, b"123456789"), 0xE306_9283);
        assert_eq!(HashFn::Crc16Ccitt.hash(0xFFFF, b"123456789"), 0x29B1);
        assert_eq!(HashFn::Crc16Arc.hash(0, b"123456789"), 0xBB3D);
    }

    #[test]
    fn seeding_is_an_xor_of_a_per_length_term() {
        let mut r = crate::rng::Streams::new(5).stream("crc");
        for f in [
            HashFn::Crc32,
            HashFn::Crc32c,
            HashFn::Crc16Ccitt,
            HashFn::Crc16Arc,
        ] {
            for _ in 0..200 {
                let len = 1 + r.below(KEY_MAX as u64) as usize;
                let key: Vec<u8> = (0..len).map(|_| r.below(256) as u8).collect();
                let seed = r.next_u64() as u32;
                assert_eq!(
                    f.hash(seed, &key),
                    f.hash(0, &key) ^ f.seed_term(seed, len),
                    "{f:?}"
                );
            }
        }
    }

    #[test]
    fn every_field_and_the_vlan_reach_the_key() {
        let all = HashFields::NAMES.iter().fold(HashFields::NONE, |f, n| {
            f.with(HashFields::from_name(n).unwrap())
        });
        assert_eq!(all.key_len(), KEY_MAX);
        let pkt = Packet {
            src: crate::topology::NicId(1),
            dst: crate::topology::NicId(2),
            qp: QpId(3),
            psn: 0,
            payload: 0,
            wire_bytes: 0,
            header_crc: 0,
            udp_sport: 50000,
            opcode: crate::wire::Opcode::WriteMiddle,
            tos: 0,
            flow: crate::wire::packet::NO_FLOW,
        };
        let (mut a, mut b) = ([0u8; KEY_MAX], [0u8; KEY_MAX]);
        assert_eq!(all.key(&pkt, 1, &mut a), KEY_MAX);
        all.key(&pkt, 2, &mut b);
        assert_ne!(a, b);
        assert_eq!(a[KEY_MAX - 2..], [0, 1]);
    }

    #[test]
    fn seed_changes_the_hash() {
        assert_ne!(HashFn::Crc32.hash(1, b"abc"), HashFn::Crc32.hash(2, b"abc"));
    }
}

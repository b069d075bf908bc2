//! Real frame bytes for packet captures: what each simulated packet would
//! look like on the wire, so that Wireshark decodes it.
//!
//! Addresses are derived from ids: a port's MAC is `02:fa` followed by its
//! port id; NIC `n` has IPv4 address `10.0.0.0 + n + 1`; a switch has
//! `10.255.0.0 + s + 1` (its heartbeats come from there). QP numbers are
//! the simulator's QP id plus 256, since QPs 0 and 1 are special in
//! InfiniBand. Payload bytes are zeros. The FCS is not captured (as a
//! NIC's capture would not); the ICRC is computed and correct.
//!
//! HPCC's INT records (`wire::int`) follow the RoCEv2 packet as an
//! Ethernet trailer, outside the IP packet, so that the frame has the
//! length the simulator charges and its headers decode as before
//! (Wireshark shows the records as a trailer); deployments carry them in
//! a shim header instead. The trailer is a 2-byte record count, then 5
//! records of 8 bytes in the HPCC paper's packing, most significant bits
//! first: line rate (3 bits: 25, 50, 100, 200, 400, 800 Gb/s, 1.6 Tb/s,
//! other), time (24 bits, ns), bytes sent (20 bits, 128 B units) and
//! queue (17 bits, 80 B units), each wrapping.

use super::frame::{self, Opcode};
use super::Packet;

/// The MAC address of a port.
pub fn port_mac(port: u32) -> [u8; 6] {
    let p = port.to_be_bytes();
    [0x02, 0xfa, p[0], p[1], p[2], p[3]]
}

/// The IPv4 address of a NIC.
pub fn nic_ip(nic: u32) -> [u8; 4] {
    (0x0a00_0000u32 + nic + 1).to_be_bytes()
}

/// The IPv4 address of a switch.
pub fn switch_ip(switch: u32) -> [u8; 4] {
    (0x0aff_0000u32 + (switch & 0xffff) + 1).to_be_bytes()
}

/// The QP number a simulator QP id has on the wire (24 bits).
pub fn qpn(qp: u32) -> u32 {
    (qp + 256) & 0x00ff_ffff
}

/// The UDP port of GLB heartbeats (the simulator's own protocol).
pub const HEARTBEAT_UDP_PORT: u16 = 4792;
/// PFC frames go to the MAC control multicast address.
pub const PFC_DST_MAC: [u8; 6] = [0x01, 0x80, 0xc2, 0x00, 0x00, 0x01];

/// What a frame needs beyond the packet record.
#[derive(Clone, Copy, Debug)]
pub struct Context {
    /// MACs of the sending and the receiving port.
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    /// IP addresses (ignored for PFC frames).
    pub src_ip: [u8; 4],
    pub dst_ip: [u8; 4],
    /// RDMA Write First/Only: the length of the whole message.
    pub dma_length: u32,
    /// The 802.1Q tag control information (priority code point, drop
    /// eligible bit, VLAN ID) of a tagged frame.
    pub vlan_tci: Option<u16>,
    /// HPCC's INT records, on the frames that carry them.
    pub int: Option<super::int::Int>,
}

/// Tag control information: priority in the top 3 bits, VLAN ID in the
/// low 12 (drop eligible bit clear).
pub fn vlan_tci(priority: u8, vlan_id: u16) -> u16 {
    (priority as u16 & 7) << 13 | (vlan_id & 0x0fff)
}

const CRC32: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC);

/// The frame from destination MAC to the end of the ICRC (or of the
/// padding), without FCS.
pub fn encode(pkt: &Packet, ctx: &Context) -> Vec<u8> {
    let mut f = Vec::with_capacity(64 + pkt.payload as usize);
    f.extend_from_slice(&ctx.dst_mac);
    f.extend_from_slice(&ctx.src_mac);
    if pkt.opcode == Opcode::Pause {
        f[..6].copy_from_slice(&PFC_DST_MAC);
        pfc(&mut f, pkt);
    } else {
        if let Some(tci) = ctx.vlan_tci {
            f.extend_from_slice(&frame::VLAN_TPID.to_be_bytes());
            f.extend_from_slice(&tci.to_be_bytes());
        }
        f.extend_from_slice(&0x0800u16.to_be_bytes());
        if pkt.opcode == Opcode::Heartbeat {
            heartbeat(&mut f, pkt, ctx);
        } else {
            roce(&mut f, pkt, ctx);
            if let Some(int) = &ctx.int {
                int_trailer(&mut f, int);
            }
        }
    }
    // Padded to the 64 B minimum frame less the FCS.
    let min = (frame::MIN_FRAME - frame::ETH_FCS) as usize;
    if f.len() < min {
        f.resize(min, 0);
    }
    f
}

/// The INT records as a trailer (see the module's notes).
fn int_trailer(f: &mut Vec<u8>, int: &super::int::Int) {
    f.extend_from_slice(&u16::from(int.n).to_be_bytes());
    for i in 0..super::int::MAX_HOPS {
        let word = if i < int.n as usize {
            let h = &int.hops[i];
            let rate = match h.rate_bps / 1_000_000_000 {
                25 => 0,
                50 => 1,
                100 => 2,
                200 => 3,
                400 => 4,
                800 => 5,
                1600 => 6,
                _ => 7,
            };
            let time = (h.ts.0 / 1000) & 0xff_ffff;
            let bytes = (h.tx_bytes / 128) & 0xf_ffff;
            let qlen = (h.qlen / 80) & 0x1_ffff;
            rate << 61 | time << 37 | bytes << 17 | qlen
        } else {
            0
        };
        f.extend_from_slice(&word.to_be_bytes());
    }
}

fn pfc(f: &mut Vec<u8>, pkt: &Packet) {
    f.extend_from_slice(&frame::MAC_CONTROL_ETHERTYPE.to_be_bytes());
    f.extend_from_slice(&frame::PFC_OPCODE.to_be_bytes());
    // The class-enable vector, then eight pause times in quanta.
    let enable = pkt.tos as u16;
    f.extend_from_slice(&enable.to_be_bytes());
    for c in 0..8 {
        let quanta = if enable & (1 << c) != 0 {
            pkt.psn as u16
        } else {
            0
        };
        f.extend_from_slice(&quanta.to_be_bytes());
    }
}

/// IPv4 header with its checksum.
fn ipv4(f: &mut Vec<u8>, tos: u8, ip_len: u16, ident: u16, src: [u8; 4], dst: [u8; 4]) {
    let start = f.len();
    f.extend_from_slice(&[0x45, tos]);
    f.extend_from_slice(&ip_len.to_be_bytes());
    f.extend_from_slice(&ident.to_be_bytes());
    // Don't fragment; TTL 64; UDP; checksum filled in below.
    f.extend_from_slice(&[0x40, 0x00, 64, frame::IP_PROTO_UDP, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    let sum = ipv4_checksum(&f[start..start + 20]);
    f[start + 10..start + 12].copy_from_slice(&sum.to_be_bytes());
}

/// The one's-complement sum of the header's 16-bit words, complemented.
pub fn ipv4_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header
        .chunks(2)
        .map(|w| u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]) as u32)
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn udp(f: &mut Vec<u8>, sport: u16, dport: u16, udp_len: u16) {
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    // No checksum: RoCEv2 leaves it zero over IPv4.
    f.extend_from_slice(&[0, 0]);
}

fn heartbeat(f: &mut Vec<u8>, pkt: &Packet, ctx: &Context) {
    let udp_len = frame::UDP_HEADER as u16 + pkt.payload as u16;
    ipv4(f, pkt.tos, 20 + udp_len, 0, ctx.src_ip, ctx.dst_ip);
    udp(f, HEARTBEAT_UDP_PORT, HEARTBEAT_UDP_PORT, udp_len);
    f.resize(f.len() + pkt.payload as usize, 0);
}

fn roce(f: &mut Vec<u8>, pkt: &Packet, ctx: &Context) {
    let (bth_opcode, payload) = match pkt.opcode {
        // A trimmed packet keeps its headers; the opcode of a middle.
        Opcode::Trimmed => (Opcode::WriteMiddle.bth_opcode(), 0),
        Opcode::Cnp => (Opcode::Cnp.bth_opcode(), frame::CNP_PAYLOAD),
        o => (o.bth_opcode(), pkt.payload),
    };
    // The payload is padded to a multiple of 4 bytes (BTH pad count).
    let pad = (4 - payload % 4) % 4;
    let ext = if pkt.opcode.has_reth() {
        frame::RETH
    } else if matches!(pkt.opcode, Opcode::Ack | Opcode::Nak) {
        frame::AETH
    } else {
        0
    };
    let transport = frame::BTH + ext + payload + pad + frame::ICRC;
    let udp_len = (frame::UDP_HEADER + transport) as u16;
    let ip_start = f.len();
    ipv4(
        f,
        pkt.tos,
        frame::IPV4_HEADER as u16 + udp_len,
        pkt.psn as u16,
        ctx.src_ip,
        ctx.dst_ip,
    );
    udp(f, pkt.udp_sport, frame::ROCEV2_UDP_PORT, udp_len);
    // BTH: opcode; solicited event 0, migration 0, pad count, version 0;
    // partition key; reserved; destination QP; ack request; PSN.
    f.push(bth_opcode);
    f.push((pad as u8) << 4);
    f.extend_from_slice(&0xffffu16.to_be_bytes());
    f.push(0);
    f.extend_from_slice(&qpn(pkt.qp.0).to_be_bytes()[1..]);
    let ack_req = matches!(pkt.opcode, Opcode::WriteLast | Opcode::WriteOnly);
    f.push(if ack_req { 0x80 } else { 0 });
    let psn = if pkt.opcode == Opcode::Cnp {
        0
    } else {
        pkt.psn
    };
    f.extend_from_slice(&(psn & 0x00ff_ffff).to_be_bytes()[1..]);
    if pkt.opcode.has_reth() {
        // Virtual address of the message in the responder's memory, the
        // QP's remote key, and the message length.
        f.extend_from_slice(&((pkt.qp.0 as u64) << 32).to_be_bytes());
        f.extend_from_slice(&pkt.qp.0.to_be_bytes());
        f.extend_from_slice(&ctx.dma_length.to_be_bytes());
    }
    if matches!(pkt.opcode, Opcode::Ack | Opcode::Nak) {
        // Syndrome: ACK with no credit limit (0x1f), or NAK "PSN sequence
        // error" (0x60); then the message sequence number.
        f.push(if pkt.opcode == Opcode::Ack {
            0x1f
        } else {
            0x60
        });
        f.extend_from_slice(&[0, 0, 0]);
    }
    f.resize(f.len() + (payload + pad) as usize, 0);
    let icrc = icrc(&f[ip_start..]);
    f.extend_from_slice(&icrc.to_le_bytes());
}

/// The RoCEv2 invariant CRC of an IPv4 packet (IP header through the last
/// payload byte, without the ICRC): CRC-32 as Ethernet computes it over 8
/// bytes of ones (standing for InfiniBand's local route header), then the
/// packet with the fields routers may change set to ones: IP TOS, TTL and
/// header checksum, the UDP checksum, and the BTH reserved byte before the
/// destination QP. It goes on the wire least significant byte first.
pub fn icrc(ip_packet: &[u8]) -> u32 {
    let mut masked = ip_packet.to_vec();
    masked[1] = 0xff;
    masked[8] = 0xff;
    masked[10] = 0xff;
    masked[11] = 0xff;
    // UDP checksum (IP header is 20 bytes).
    masked[26] = 0xff;
    masked[27] = 0xff;
    // BTH byte 4 (BTH starts after UDP, at 28).
    masked[32] = 0xff;
    let mut d = CRC32.digest();
    d.update(&[0xff; 8]);
    d.update(&masked);
    d.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{NicId, QpId};
    use crate::wire::frame::ecn;

    fn ctx() -> Context {
        Context {
            src_mac: port_mac(1),
            dst_mac: port_mac(2),
            src_ip: nic_ip(0),
            dst_ip: nic_ip(1),
            dma_length: 8192,
            vlan_tci: None,
            int: None,
        }
    }

    fn packet(opcode: Opcode, payload: u32) -> Packet {
        Packet {
            src: NicId(0),
            dst: NicId(1),
            qp: QpId(5),
            psn: 0x12_3456,
            payload,
            wire_bytes: frame::wire_bytes(opcode, payload),
            header_crc: 0,
            udp_sport: 49152,
            opcode,
            tos: Packet::tos_of(26, ecn::ECT0),
            flow: crate::wire::packet::NO_FLOW,
        }
    }

    /// Linux's soft-RoCE starts its ICRC from 0xdebb20e3, the CRC register
    /// after the 8 bytes of ones; ours must agree.
    #[test]
    fn the_icrc_starts_where_soft_roce_starts() {
        let mut d = CRC32.digest();
        d.update(&[0xff; 8]);
        // `finalize` complements the register.
        assert_eq!(!d.finalize(), 0xdebb_20e3);
    }

    /// Frame sizes agree with the simulator's accounting (which has no pad
    /// bytes: payloads here are multiples of 4).
    #[test]
    fn frames_are_as_long_as_the_simulator_counts_them() {
        for (op, payload) in [
            (Opcode::WriteFirst, 4096),
            (Opcode::WriteMiddle, 4096),
            (Opcode::WriteOnly, 1000),
            (Opcode::Ack, 0),
            (Opcode::Nak, 0),
            (Opcode::Cnp, 0),
            (Opcode::Pause, 0),
        ] {
            let f = encode(&packet(op, payload), &ctx());
            let want = frame::frame_bytes(op, payload) - frame::ETH_FCS;
            assert_eq!(f.len() as u32, want, "{op:?}");
            let tagged = Context {
                vlan_tci: (op != Opcode::Pause).then_some(vlan_tci(3, 7)),
                ..ctx()
            };
            let f = encode(&packet(op, payload), &tagged);
            let framing = frame::Framing {
                vlan_tag: true,
                ..frame::Framing::default()
            };
            let want = framing.frame_bytes(op, payload) - frame::ETH_FCS;
            assert_eq!(f.len() as u32, want, "tagged {op:?}");
            // HPCC: the INT records on the frames that carry them.
            let framing = frame::Framing {
                int_bytes: crate::wire::int::INT_BYTES,
                ..frame::Framing::default()
            };
            let with_int = Context {
                int: (framing.int_of(op) > 0).then(Default::default),
                ..ctx()
            };
            let f = encode(&packet(op, payload), &with_int);
            let want = framing.frame_bytes(op, payload) - frame::ETH_FCS;
            assert_eq!(f.len() as u32, want, "INT {op:?}");
        }
    }

    /// The INT trailer follows the ICRC, outside the IP packet: the count,
    /// then each record in the paper's packing.
    #[test]
    fn int_records_trail_the_ip_packet() {
        let mut int = crate::wire::int::Int::default();
        int.push(crate::wire::int::Hop {
            ts: crate::units::SimTime::from_ns(1000),
            tx_bytes: 128 * 5,
            qlen: 80 * 3,
            rate_bps: 100_000_000_000,
        });
        let plain = encode(&packet(Opcode::Ack, 0), &ctx());
        let f = encode(
            &packet(Opcode::Ack, 0),
            &Context {
                int: Some(int),
                ..ctx()
            },
        );
        assert_eq!(&f[..plain.len()], &plain[..]);
        let t = &f[plain.len()..];
        assert_eq!(t.len(), 42);
        assert_eq!(&t[..2], &[0, 1]);
        let word = u64::from_be_bytes(t[2..10].try_into().unwrap());
        assert_eq!(word, 2 << 61 | 1000 << 37 | 5 << 17 | 3);
        assert!(t[10..].iter().all(|&b| b == 0));
    }

    #[test]
    fn a_tagged_frame_carries_priority_and_vlan_before_the_ethertype() {
        let tagged = Context {
            vlan_tci: Some(vlan_tci(3, 0x123)),
            ..ctx()
        };
        let f = encode(&packet(Opcode::WriteFirst, 4096), &tagged);
        assert_eq!(&f[12..18], &[0x81, 0x00, 0x61, 0x23, 0x08, 0x00]);
        // The ICRC covers the IP packet, which the tag does not touch.
        let n = f.len();
        assert_eq!(f[n - 4..], icrc(&f[18..n - 4]).to_le_bytes());
        let untagged = encode(&packet(Opcode::WriteFirst, 4096), &ctx());
        assert_eq!(f[18..], untagged[14..]);
    }

    #[test]
    fn headers_carry_the_packet_fields() {
        let f = encode(&packet(Opcode::WriteFirst, 4096), &ctx());
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        // TOS: DSCP 26, ECT(0).
        assert_eq!(f[15], 26 << 2 | 2);
        assert_eq!(ipv4_checksum(&f[14..34]), 0, "the checksum verifies");
        assert_eq!(u16::from_be_bytes([f[36], f[37]]), 4791);
        assert_eq!(f[42], 0x06);
        assert_eq!(&f[47..50], &[0, 1, 5]);
        assert_eq!(&f[51..54], &[0x12, 0x34, 0x56]);
        // RETH DMA length.
        assert_eq!(&f[66..70], &8192u32.to_be_bytes());
        // The ICRC is the last 4 bytes, over the IP packet before it.
        let n = f.len();
        assert_eq!(f[n - 4..], icrc(&f[14..n - 4]).to_le_bytes());
        // Changing a masked field leaves the ICRC as it was; changing the
        // PSN does not.
        let mut g = f.clone();
        g[15] ^= 3;
        g[22] = 3;
        assert_eq!(icrc(&g[14..n - 4]), icrc(&f[14..n - 4]));
        g[53] ^= 1;
        assert_ne!(icrc(&g[14..n - 4]), icrc(&f[14..n - 4]));
    }

    #[test]
    fn a_pfc_frame_pauses_the_classes_it_enables() {
        let mut p = packet(Opcode::Pause, 0);
        p.tos = 1 << 3;
        p.psn = 65535;
        let f = encode(&p, &ctx());
        assert_eq!(&f[..6], &PFC_DST_MAC);
        assert_eq!(&f[12..18], &[0x88, 0x08, 0x01, 0x01, 0x00, 0x08]);
        assert_eq!(&f[18 + 6..18 + 8], &[0xff, 0xff], "class 3's time");
        assert_eq!(&f[18..18 + 6], &[0; 6]);
        assert_eq!(f.len(), 60);
    }
}

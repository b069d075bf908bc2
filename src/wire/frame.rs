//! Frame layout of RoCEv2 and the bytes each packet costs on the wire.
//!
//! A RoCEv2 frame is Ethernet II (14 B header, 4 B FCS) / IPv4 (20 B) /
//! UDP (8 B, destination port 4791) / InfiniBand BTH (12 B) / RETH (16 B,
//! only on packets that carry a remote address: RDMA Write First and Write
//! Only) or AETH (4 B, on ACK/NAK) / payload / ICRC (4 B). On the wire every
//! frame is also preceded by 7 B preamble and 1 B start delimiter and
//! followed by a 12 B minimum inter-frame gap (IEEE 802.3), and is padded
//! to the 64 B minimum frame. Serialization time counts all of it. With
//! `[qos] vlan_tagging`, RoCEv2 frames also carry a 4 B IEEE 802.1Q tag.

/// Preamble (7 B) + start-of-frame delimiter (1 B) + inter-frame gap (12 B).
pub const PREAMBLE_SFD_IFG: u32 = 20;
pub const ETH_HEADER: u32 = 14;
pub const ETH_FCS: u32 = 4;
pub const IPV4_HEADER: u32 = 20;
pub const UDP_HEADER: u32 = 8;
pub const BTH: u32 = 12;
pub const RETH: u32 = 16;
pub const AETH: u32 = 4;
pub const ICRC: u32 = 4;
/// Minimum Ethernet frame, destination MAC through FCS.
pub const MIN_FRAME: u32 = 64;
pub const VLAN_TAG: u32 = 4;
pub const VLAN_TPID: u16 = 0x8100;
/// RoCEv2's registered UDP destination port.
pub const ROCEV2_UDP_PORT: u16 = 4791;
/// IP protocol number of UDP.
pub const IP_PROTO_UDP: u8 = 17;

/// The InfiniBand BTH opcodes of the reliable-connected service that the
/// simulator uses (IBTA spec vol. 1, table 38).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[repr(u8)]
pub enum Opcode {
    WriteFirst,
    WriteMiddle,
    WriteLast,
    WriteOnly,
    /// Positive acknowledgement (AETH syndrome ACK).
    Ack,
    /// Negative acknowledgement, PSN sequence error (AETH syndrome NAK).
    Nak,
    /// Congestion notification packet (RoCEv2 CNP, BTH opcode 0x81): the
    /// receiver of a CE-marked packet tells the sender's QP to slow down.
    Cnp,
    /// IEEE 802.1Qbb priority flow control frame (MAC control, ethertype
    /// 0x8808, opcode 0x0101). Not an IP packet: it never leaves the link
    /// it was sent on.
    Pause,
    /// The headers of a data packet whose payload a switch trimmed off
    /// instead of dropping it (the PSN is the data packet's).
    Trimmed,
    /// A global-load-balancing heartbeat between neighbouring switches (a
    /// UDP datagram): the sender's link quality bands, one byte per port.
    Heartbeat,
}

/// MAC control ethertype, carried by PFC frames.
pub const MAC_CONTROL_ETHERTYPE: u16 = 0x8808;
/// MAC control opcode of a priority flow control frame.
pub const PFC_OPCODE: u16 = 0x0101;
/// RoCEv2 CNP: 16 reserved bytes after the BTH.
pub const CNP_PAYLOAD: u32 = 16;

/// ECN codepoints (RFC 3168), the two low bits of the IPv4 TOS byte.
pub mod ecn {
    pub const NOT_ECT: u8 = 0b00;
    pub const ECT1: u8 = 0b01;
    pub const ECT0: u8 = 0b10;
    pub const CE: u8 = 0b11;
}

impl Opcode {
    /// The BTH opcode byte.
    pub fn bth_opcode(self) -> u8 {
        match self {
            Opcode::WriteFirst => 0x06,
            Opcode::WriteMiddle => 0x07,
            Opcode::WriteLast => 0x08,
            Opcode::WriteOnly => 0x0A,
            Opcode::Ack | Opcode::Nak => 0x11,
            Opcode::Cnp => 0x81,
            Opcode::Pause | Opcode::Heartbeat | Opcode::Trimmed => 0,
        }
    }

    pub fn has_reth(self) -> bool {
        matches!(self, Opcode::WriteFirst | Opcode::WriteOnly)
    }

    pub fn is_data(self) -> bool {
        matches!(
            self,
            Opcode::WriteFirst | Opcode::WriteMiddle | Opcode::WriteLast | Opcode::WriteOnly
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            Opcode::WriteFirst => "write-first",
            Opcode::WriteMiddle => "write-middle",
            Opcode::WriteLast => "write-last",
            Opcode::WriteOnly => "write-only",
            Opcode::Ack => "ack",
            Opcode::Nak => "nak",
            Opcode::Cnp => "cnp",
            Opcode::Pause => "pfc-pause",
            Opcode::Heartbeat => "glb-heartbeat",
            Opcode::Trimmed => "trimmed",
        }
    }
}

/// Bytes of the frame from destination MAC to FCS before padding.
fn unpadded(opcode: Opcode, payload: u32) -> u32 {
    match opcode {
        // Destination MAC, source MAC, ethertype, opcode, class-enable
        // vector, eight quanta, padding: always the minimum frame.
        Opcode::Pause => MIN_FRAME,
        Opcode::Cnp => ETH_HEADER + IPV4_HEADER + UDP_HEADER + BTH + CNP_PAYLOAD + ICRC + ETH_FCS,
        Opcode::Heartbeat => ETH_HEADER + IPV4_HEADER + UDP_HEADER + payload + ETH_FCS,
        _ => {
            let transport = BTH
                + ICRC
                + if opcode.has_reth() { RETH } else { 0 }
                + if opcode.is_data() { 0 } else { AETH };
            ETH_HEADER + IPV4_HEADER + UDP_HEADER + transport + payload + ETH_FCS
        }
    }
}

/// Bytes of an untagged frame from destination MAC to FCS (what a switch
/// buffers).
pub fn frame_bytes(opcode: Opcode, payload: u32) -> u32 {
    Framing::default().frame_bytes(opcode, payload)
}

/// Bytes an untagged frame occupies on the wire, including preamble and
/// gap.
pub fn wire_bytes(opcode: Opcode, payload: u32) -> u32 {
    frame_bytes(opcode, payload) + PREAMBLE_SFD_IFG
}

/// How RoCEv2 frames (data, ACKs, NAKs, CNPs, trimmed headers) are
/// framed: untagged, or with an IEEE 802.1Q tag (4 B after the source
/// MAC: TPID 0x8100, then priority code point, drop eligible bit and
/// VLAN ID) on every link. PFC frames are MAC control frames and GLB
/// heartbeats come from the switches: never tagged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Framing {
    pub vlan_tag: bool,
    /// Bytes of INT records every data packet, trimmed header, ACK and
    /// NAK carries (`wire::int::INT_BYTES` under HPCC, else 0).
    pub int_bytes: u32,
}

impl Framing {
    /// Whether a frame of this kind carries the tag.
    pub fn tags(self, opcode: Opcode) -> bool {
        self.vlan_tag && !matches!(opcode, Opcode::Pause | Opcode::Heartbeat)
    }

    /// Bytes from destination MAC to FCS, padded to the minimum frame
    /// (which a tag does not change).
    pub fn frame_bytes(self, opcode: Opcode, payload: u32) -> u32 {
        let tag = if self.tags(opcode) { VLAN_TAG } else { 0 };
        (unpadded(opcode, payload) + tag + self.int_of(opcode)).max(MIN_FRAME)
    }

    /// INT bytes a frame of this kind carries.
    pub fn int_of(self, opcode: Opcode) -> u32 {
        match opcode {
            Opcode::Pause | Opcode::Heartbeat | Opcode::Cnp => 0,
            _ => self.int_bytes,
        }
    }

    /// Bytes on the wire, including preamble and gap.
    pub fn wire_bytes(self, opcode: Opcode, payload: u32) -> u32 {
        self.frame_bytes(opcode, payload) + PREAMBLE_SFD_IFG
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_sizes_match_the_header_stack() {
        // 20 + 14 + 20 + 8 + 12 + 16 + 4096 + 4 + 4
        assert_eq!(wire_bytes(Opcode::WriteFirst, 4096), 4194);
        assert_eq!(wire_bytes(Opcode::WriteMiddle, 4096), 4178);
        assert_eq!(wire_bytes(Opcode::WriteOnly, 4000), 4098);
        // An ACK (66 B frame) is above the 64 B minimum.
        assert_eq!(frame_bytes(Opcode::Ack, 0), 66);
        // A 1-byte Write Middle (63 B) is padded to the minimum frame.
        assert_eq!(frame_bytes(Opcode::WriteMiddle, 1), 64);
        assert_eq!(frame_bytes(Opcode::WriteFirst, 1), 79);
        // CNP: 14 + 20 + 8 + 12 + 16 + 4 + 4; PFC: the minimum frame.
        assert_eq!(frame_bytes(Opcode::Cnp, 0), 78);
        assert_eq!(wire_bytes(Opcode::Pause, 0), 84);
        assert_eq!(Opcode::Cnp.bth_opcode(), 0x81);
    }

    #[test]
    fn a_vlan_tag_adds_four_bytes_to_rocev2_frames_only() {
        let tagged = Framing {
            vlan_tag: true,
            ..Framing::default()
        };
        assert_eq!(tagged.wire_bytes(Opcode::WriteFirst, 4096), 4198);
        assert_eq!(tagged.frame_bytes(Opcode::Ack, 0), 70);
        assert_eq!(tagged.frame_bytes(Opcode::Cnp, 0), 82);
        // Padding absorbs the tag of a tiny frame.
        assert_eq!(tagged.frame_bytes(Opcode::WriteMiddle, 1), 67);
        assert_eq!(tagged.frame_bytes(Opcode::Pause, 0), 64);
        assert_eq!(tagged.frame_bytes(Opcode::Heartbeat, 8), 64);
        assert_eq!(Framing::default().wire_bytes(Opcode::WriteOnly, 4000), 4098);
    }
}

//! A minimal pcapng writer (section header, one interface description per
//! link, enhanced packet blocks), little-endian, with nanosecond
//! timestamps. Written here because pcap-file 2 writes enhanced packet
//! timestamps in microseconds whatever the interface's resolution.

use std::io::{self, Write};

const SECTION_HEADER: u32 = 0x0a0d_0d0a;
const INTERFACE_DESCRIPTION: u32 = 1;
const ENHANCED_PACKET: u32 = 6;
const LINKTYPE_ETHERNET: u16 = 1;
const OPT_END: u16 = 0;
const SHB_USERAPPL: u16 = 4;
const IF_NAME: u16 = 2;
const IF_SPEED: u16 = 8;
const IF_TSRESOL: u16 = 9;

fn pad4(n: usize) -> usize {
    n.div_ceil(4) * 4
}

/// One option: code, length, value padded to 4 bytes.
fn option(body: &mut Vec<u8>, code: u16, value: &[u8]) {
    body.extend_from_slice(&code.to_le_bytes());
    body.extend_from_slice(&(value.len() as u16).to_le_bytes());
    body.extend_from_slice(value);
    body.resize(pad4(body.len()), 0);
}

/// A block: type, total length, body, total length again.
fn block(w: &mut impl Write, kind: u32, body: &[u8]) -> io::Result<()> {
    let total = (12 + body.len()) as u32;
    w.write_all(&kind.to_le_bytes())?;
    w.write_all(&total.to_le_bytes())?;
    w.write_all(body)?;
    w.write_all(&total.to_le_bytes())
}

/// The section header: byte-order magic, version 1.0, unknown length.
pub fn section_header(w: &mut impl Write) -> io::Result<()> {
    let mut b = Vec::new();
    b.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&(-1i64).to_le_bytes());
    option(&mut b, SHB_USERAPPL, b"fabricsim");
    option(&mut b, OPT_END, &[]);
    block(w, SECTION_HEADER, &b)
}

/// An Ethernet interface named after its link, with its speed and
/// nanosecond timestamps.
pub fn interface(w: &mut impl Write, name: &str, bits_per_second: u64) -> io::Result<()> {
    let mut b = Vec::new();
    b.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    // No snap length limit.
    b.extend_from_slice(&0u32.to_le_bytes());
    option(&mut b, IF_NAME, name.as_bytes());
    option(&mut b, IF_SPEED, &bits_per_second.to_le_bytes());
    option(&mut b, IF_TSRESOL, &[9]);
    option(&mut b, OPT_END, &[]);
    block(w, INTERFACE_DESCRIPTION, &b)
}

/// A whole frame seen on `iface` at `ns` nanoseconds.
pub fn packet(w: &mut impl Write, iface: u32, ns: u64, frame: &[u8]) -> io::Result<()> {
    let mut b = Vec::with_capacity(20 + pad4(frame.len()));
    b.extend_from_slice(&iface.to_le_bytes());
    b.extend_from_slice(&((ns >> 32) as u32).to_le_bytes());
    b.extend_from_slice(&(ns as u32).to_le_bytes());
    b.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    b.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    b.extend_from_slice(frame);
    b.resize(20 + pad4(frame.len()), 0);
    block(w, ENHANCED_PACKET, &b)
}

/// The capture file: the engine's frame sink, writing pcapng.
pub struct PcapngSink<W: Write> {
    out: io::BufWriter<W>,
}

impl<W: Write> PcapngSink<W> {
    /// Starts the file with its section header.
    pub fn new(w: W) -> io::Result<Self> {
        let mut out = io::BufWriter::with_capacity(1 << 20, w);
        section_header(&mut out)?;
        Ok(PcapngSink { out })
    }
}

impl<W: Write + Send> crate::engine::FrameSink for PcapngSink<W> {
    fn link(&mut self, name: &str, bits_per_second: u64) -> io::Result<()> {
        interface(&mut self.out, name, bits_per_second)
    }

    fn frame(&mut self, link: u32, ns: u64, bytes: &[u8]) -> io::Result<()> {
        packet(&mut self.out, link, ns, bytes)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_padded_and_framed_by_their_length() {
        let mut v = Vec::new();
        section_header(&mut v).unwrap();
        assert_eq!(&v[..4], &[0x0a, 0x0d, 0x0d, 0x0a]);
        let n = u32::from_le_bytes(v[4..8].try_into().unwrap()) as usize;
        assert_eq!(n, v.len());
        assert_eq!(&v[n - 4..], &v[4..8]);
        let mut p = Vec::new();
        packet(&mut p, 3, 0x1_0000_0005, &[1, 2, 3, 4, 5]).unwrap();
        assert_eq!(p.len(), 12 + 20 + 8);
        assert_eq!(&p[8..12], &3u32.to_le_bytes());
        assert_eq!(&p[12..16], &1u32.to_le_bytes());
        assert_eq!(&p[16..20], &5u32.to_le_bytes());
    }
}

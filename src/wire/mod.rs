//! What travels on the wire: RoCEv2 frames and their sizes.
//!
//! `frame` holds the header sizes and opcodes of Ethernet / IPv4 / UDP /
//! InfiniBand BTH (RETH, AETH) / ICRC; `packet` the compact in-flight
//! packet record and the arena it lives in; `encode` the real bytes of a
//! frame, for captures; `int` the telemetry records HPCC's switches stamp. No payload bytes are carried: the simulator moves
//! sizes and header fields, never data.

pub mod encode;
pub mod frame;
pub mod int;
pub mod packet;

pub use frame::Opcode;
pub use packet::{Packet, PacketArena, PacketId};

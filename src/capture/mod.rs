//! Capture hot path: one AF_PACKET socket per port with a TPACKET_V3 receive ring and a classic BPF
//! filter (`socket`), frame parsing (`frame`), and bounded per-client accounting (`table`).
//!
//! All `unsafe` code of this module lives in `socket.rs`, `setup.rs` and `ring.rs`.

pub mod ebpf;
pub mod filter;
pub mod frame;
mod ring;
pub mod sampling;
mod setup;
pub mod socket;
pub mod table;

pub use ebpf::Hook;
pub use filter::{DEFAULT_SNAP_LEN, MAX_MACS, MAX_SAMPLING};
pub use frame::{parse, Frame, Mac, NdKind};
pub use socket::{
    CaptureSocket, FrameMeta, RingConfig, RingStats, PACKET_BROADCAST, PACKET_HOST,
    PACKET_MULTICAST, PACKET_OTHERHOST, PACKET_OUTGOING,
};
pub use table::{ClientEntry, ClientTable};

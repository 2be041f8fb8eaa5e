//! Capture hot path: one AF_PACKET socket per port with a TPACKET_V3 receive ring and a classic BPF
//! filter (`socket`), frame parsing (`frame`), and bounded per-client accounting (`table`).
//!
//! Its `unsafe` code: the socket calls and the ring's memory (`socket.rs`, `setup.rs`, `ring.rs`),
//! the client table's prefetch hints (`table.rs`), and bpf(2), the maps and the ring buffer
//! (`ebpf/sys.rs`, `ebpf/tc.rs`, `ebpf/ringbuf.rs`).

pub mod ebpf;
pub mod filter;
pub mod frame;
pub mod promisc;
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

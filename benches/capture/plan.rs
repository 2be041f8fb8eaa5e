//! The namespace benchmark's rows: who receives the flood (`Receiver`) and the plan of rows
//! every round runs, in order.

use rlbd::capture::sampling::DEFAULT_MAX_FRAMES_PER_SEC;
use rlbd::capture::{ClientTable, MAX_SAMPLING};

use super::ns::{ACCURACY_SOURCES, SOURCES};
use super::recv::Sampling;

#[derive(Clone, Copy, PartialEq)]
pub enum Receiver {
    None,
    Rlbd {
        capacity: usize,
        sampling: Sampling,
        per_client: bool,
    },
    Pnet,
    /// A program that does nothing at the tc ingress hook: the hook's own cost.
    TcFloor,
}

impl Receiver {
    fn exact(capacity: usize) -> Receiver {
        Receiver::Rlbd {
            capacity,
            sampling: Sampling::Off,
            per_client: false,
        }
    }

    fn sampled(capacity: usize, per_client: bool) -> Receiver {
        Receiver::Rlbd {
            capacity,
            sampling: Sampling::Auto(DEFAULT_MAX_FRAMES_PER_SEC),
            per_client,
        }
    }

    /// At the tc hook, sampled as the daemon samples by default.
    fn tc_sampled(capacity: usize, per_client: bool) -> Receiver {
        Receiver::Rlbd {
            capacity,
            sampling: Sampling::EbpfTcAuto(DEFAULT_MAX_FRAMES_PER_SEC),
            per_client,
        }
    }

    /// At the tc hook, one data frame in `n`.
    fn tc_fixed(n: u32, per_client: bool) -> Receiver {
        Receiver::Rlbd {
            capacity: ClientTable::DEFAULT_CAPACITY,
            sampling: Sampling::EbpfTcFixed(n),
            per_client,
        }
    }

    pub fn warms_up(&self) -> bool {
        matches!(
            self,
            Receiver::Rlbd {
                sampling: Sampling::Auto(_) | Sampling::EbpfTcAuto(_),
                ..
            }
        )
    }
}

/// N of the fixed-ratio tc rows: `RLBD_BENCH_TC_ONE_IN` (a power of two), 16 by default.
fn fixed_one_in() -> u32 {
    std::env::var("RLBD_BENCH_TC_ONE_IN")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n: &u32| n.is_power_of_two())
        .unwrap_or(16)
}

/// The configurations, in the order they run in every round. Row names are what the table and
/// the summary refer to.
pub fn plan() -> Vec<(&'static str, Receiver, u32)> {
    vec![
        ("baseline: no receiver", Receiver::None, SOURCES),
        (
            "(a) rlbd exact, table 16384",
            Receiver::exact(16_384),
            SOURCES,
        ),
        (
            "(c) rlbd exact, default table 4096",
            Receiver::exact(ClientTable::DEFAULT_CAPACITY),
            SOURCES,
        ),
        ("(b) naive pnet_datalink", Receiver::Pnet, SOURCES),
        (
            "(c) rlbd exact, 65,536 clients",
            Receiver::exact(65_536),
            65_536,
        ),
        (
            "(s) rlbd sampled (auto), default table",
            Receiver::sampled(ClientTable::DEFAULT_CAPACITY, false),
            SOURCES,
        ),
        (
            "(x) rlbd eBPF counting at tc ingress, default table",
            Receiver::Rlbd {
                capacity: ClientTable::DEFAULT_CAPACITY,
                sampling: Sampling::EbpfTc,
                per_client: false,
            },
            SOURCES,
        ),
        (
            "(x) rlbd eBPF counting at tc ingress, 65,536 clients",
            Receiver::Rlbd {
                capacity: 65_536,
                sampling: Sampling::EbpfTc,
                per_client: false,
            },
            65_536,
        ),
        (
            "(t) rlbd eBPF counting at tc ingress through cls_bpf, default table",
            Receiver::Rlbd {
                capacity: ClientTable::DEFAULT_CAPACITY,
                sampling: Sampling::EbpfTcFilter,
                per_client: false,
            },
            SOURCES,
        ),
        (
            "(f) rlbd eBPF counting in a socket filter, default table",
            Receiver::Rlbd {
                capacity: ClientTable::DEFAULT_CAPACITY,
                sampling: Sampling::Ebpf,
                per_client: false,
            },
            SOURCES,
        ),
        (
            "(f) rlbd eBPF counting in a socket filter, 65,536 clients",
            Receiver::Rlbd {
                capacity: 65_536,
                sampling: Sampling::Ebpf,
                per_client: false,
            },
            65_536,
        ),
        (
            "(h) rlbd eBPF counting in the LRU hash (fallback), 65,536 clients",
            Receiver::Rlbd {
                capacity: 65_536,
                sampling: Sampling::EbpfHash,
                per_client: false,
            },
            65_536,
        ),
        (
            "(k) rlbd, kernel drops every data frame",
            Receiver::Rlbd {
                capacity: ClientTable::DEFAULT_CAPACITY,
                sampling: Sampling::Fixed(MAX_SAMPLING),
                per_client: false,
            },
            SOURCES,
        ),
        (
            "(e) rlbd sampled (auto), 50 clients",
            Receiver::sampled(ClientTable::DEFAULT_CAPACITY, true),
            ACCURACY_SOURCES,
        ),
        (
            "(0) the tc hook alone: an empty program at tcx ingress",
            Receiver::TcFloor,
            SOURCES,
        ),
        (
            "(y) rlbd eBPF counting at tc ingress, 50 clients",
            Receiver::Rlbd {
                capacity: ClientTable::DEFAULT_CAPACITY,
                sampling: Sampling::EbpfTc,
                per_client: true,
            },
            ACCURACY_SOURCES,
        ),
        (
            "(z) rlbd eBPF at tc ingress, sampled (auto), default table",
            Receiver::tc_sampled(ClientTable::DEFAULT_CAPACITY, false),
            SOURCES,
        ),
        (
            "(w) rlbd eBPF at tc ingress, sampled (auto), 50 clients",
            Receiver::tc_sampled(ClientTable::DEFAULT_CAPACITY, true),
            ACCURACY_SOURCES,
        ),
        (
            "(z16) rlbd eBPF at tc ingress, 1 in N fixed, default table",
            Receiver::tc_fixed(fixed_one_in(), false),
            SOURCES,
        ),
        (
            "(w16) rlbd eBPF at tc ingress, 1 in N fixed, 50 clients",
            Receiver::tc_fixed(fixed_one_in(), true),
            ACCURACY_SOURCES,
        ),
    ]
}

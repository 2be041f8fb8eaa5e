//! The families `rlbd metrics` renders: each one's name, type, help and where its value
//! comes from in a [`StatusReport`].

use super::bool01;
use crate::status::{PortState, PortStatus, StatusReport};

/// A family with one sample per port, labelled `port`; a port without a value has no sample.
pub(super) struct PortFamily {
    pub(super) name: &'static str,
    pub(super) kind: &'static str,
    pub(super) help: &'static str,
    pub(super) value: fn(&PortStatus) -> Option<f64>,
}

/// A family with one unlabelled sample.
pub(super) struct Scalar {
    pub(super) name: &'static str,
    pub(super) kind: &'static str,
    pub(super) help: &'static str,
    /// `None`: no value yet, no sample (the family's HELP and TYPE stay).
    pub(super) value: fn(&StatusReport) -> Option<f64>,
}

pub(super) const PORT_FAMILIES: &[PortFamily] = &[
    PortFamily {
        name: "rlbd_port_up",
        kind: "gauge",
        help: "1 when the port is present and up, 0 when it is down or absent.",
        value: |p| Some(bool01(p.state == PortState::Up)),
    },
    PortFamily {
        // Named as node_exporter names a link's speed (node_network_speed_bytes).
        name: "rlbd_port_capacity_bytes",
        kind: "gauge",
        help: "Capacity of the port used for its utilization, in bytes per second (compare \
               with rate(rlbd_port_rx_bytes_total[1m])).",
        value: |p| Some(p.capacity_bps / 8.0),
    },
    PortFamily {
        name: "rlbd_port_utilization_ratio",
        kind: "gauge",
        help: "Receive rate over the last second as a fraction of the port's capacity.",
        value: |p| p.utilization,
    },
    PortFamily {
        name: "rlbd_port_rx_bytes_total",
        kind: "counter",
        help: "Bytes received by the port, as last read from the kernel's link counters.",
        value: |p| p.rx_bytes.map(|b| b as f64),
    },
    PortFamily {
        name: "rlbd_port_overloaded",
        kind: "gauge",
        help: "1 while the port's overload detector holds it overloaded.",
        value: |p| Some(bool01(p.overloaded)),
    },
    PortFamily {
        name: "rlbd_port_ring_packets_total",
        kind: "counter",
        help: "Frames the port's capture ring delivered to rlbd.",
        value: |p| Some(p.ring_packets as f64),
    },
    PortFamily {
        name: "rlbd_port_ring_drops_total",
        kind: "counter",
        help: "Frames the port's capture ring dropped because rlbd fell behind.",
        value: |p| Some(p.ring_drops as f64),
    },
    PortFamily {
        name: "rlbd_port_sampling_ratio",
        kind: "gauge",
        help: "Fraction of the port's IPv4/IPv6 frames counted: 1 counts every frame, 0.25 one \
               in 4 (rlbd status's 1/N).",
        value: |p| Some(1.0 / f64::from(p.sampling.max(1))),
    },
    PortFamily {
        name: "rlbd_port_kernel_counting",
        kind: "gauge",
        help: "1 while the port counts every IPv4/IPv6 frame in the kernel (eBPF), 0 while it \
               counts captured frames (see rlbd_port_sampling_ratio).",
        value: |p| {
            Some(f64::from(u8::from(
                p.counting == crate::status::Counting::Ebpf,
            )))
        },
    },
    PortFamily {
        name: "rlbd_port_uncounted_frames_total",
        kind: "counter",
        help: "Frames the port's counting map in the kernel could give to no client (the map \
               was full; rlbd makes no move on such seconds).",
        value: |p| Some(p.uncounted_frames as f64),
    },
    PortFamily {
        name: "rlbd_port_counted_bytes_total",
        kind: "counter",
        help: "Bytes of IPv4/IPv6 frames counted for clients on the port (scaled by the sampling \
               ratio); beside rlbd_port_rx_bytes_total, what counting covers.",
        value: |p| Some(p.counted_bytes as f64),
    },
    PortFamily {
        name: "rlbd_port_clients",
        kind: "gauge",
        help: "Tracked clients whose latest frame arrived on the port.",
        value: |p| Some(p.clients as f64),
    },
    PortFamily {
        name: "rlbd_port_guests",
        kind: "gauge",
        help: "Guests behind the bond ([guests]) pinned to the port.",
        value: |p| Some(p.guests as f64),
    },
];

pub(super) const HEAD: &[Scalar] = &[
    Scalar {
        name: "rlbd_dry_run",
        kind: "gauge",
        help: "1 when the daemon decides and logs but sends nothing.",
        value: |r| Some(bool01(r.dry_run)),
    },
    Scalar {
        name: "rlbd_uptime_seconds",
        kind: "gauge",
        help: "Seconds since the daemon started.",
        value: |r| Some(r.uptime_secs as f64),
    },
    Scalar {
        name: "rlbd_threshold_ratio",
        kind: "gauge",
        help: "Overload threshold as a fraction of a port's capacity.",
        value: |r| Some(r.threshold),
    },
    Scalar {
        name: "rlbd_saturated_ratio",
        kind: "gauge",
        help: "Utilization from which a port counts as saturated, in force (configured, or 2% under where full ports read).",
        value: |r| Some(r.saturated),
    },
    Scalar {
        name: "rlbd_max_fill_ratio",
        kind: "gauge",
        help: "How full a move off a saturated port may make its target, in force.",
        value: |r| Some(r.max_fill),
    },
    Scalar {
        name: "rlbd_saturation_ceiling_ratio",
        kind: "gauge",
        help: "Where a full port reads, as a fraction of its capacity, learned; absent until a port has read saturated or more.",
        value: |r| r.saturation_ceiling,
    },
];

pub(super) const TOTALS: &[Scalar] = &[
    Scalar {
        name: "rlbd_clients_tracked",
        kind: "gauge",
        help: "Clients in the rate table.",
        value: |r| Some(r.totals.clients_tracked as f64),
    },
    Scalar {
        name: "rlbd_clients_moved",
        kind: "gauge",
        help: "Tracked clients that rlbd has moved and still steers.",
        value: |r| Some(r.totals.clients_moved as f64),
    },
    Scalar {
        name: "rlbd_table_capacity",
        kind: "gauge",
        help: "Clients the rate table holds at most.",
        value: |r| Some(r.totals.table_capacity as f64),
    },
    Scalar {
        name: "rlbd_table_evictions_total",
        kind: "counter",
        help: "Clients evicted from the full rate table (least recently seen first).",
        value: |r| Some(r.totals.table_evictions as f64),
    },
    Scalar {
        name: "rlbd_table_expirations_total",
        kind: "counter",
        help: "Clients forgotten after the idle timeout.",
        value: |r| Some(r.totals.table_expirations as f64),
    },
    Scalar {
        name: "rlbd_send_errors_total",
        kind: "counter",
        help: "Update frames the kernel refused to send.",
        value: |r| Some(r.totals.send_errors as f64),
    },
    Scalar {
        name: "rlbd_send_retries_total",
        kind: "counter",
        help: "Refused update frames sent again after a transient error.",
        value: |r| Some(r.totals.send_retries as f64),
    },
    Scalar {
        name: "rlbd_unreliable_seconds_total",
        kind: "counter",
        help: "Seconds whose client rates were not used for moves (capture ring drops).",
        value: |r| Some(r.totals.unreliable_seconds as f64),
    },
    Scalar {
        name: "rlbd_netlink_resyncs_total",
        kind: "counter",
        help: "Times netlink notifications were lost and the kernel's tables re-read.",
        value: |r| Some(r.totals.netlink_resyncs as f64),
    },
    Scalar {
        name: "rlbd_neighbours",
        kind: "gauge",
        help: "Confirmed neighbours of the server that rlbd knows.",
        value: |r| Some(r.totals.neighbours as f64),
    },
    Scalar {
        name: "rlbd_foreign_claims_total",
        kind: "counter",
        help: "Episodes of another host claiming one of the server's addresses.",
        value: |r| Some(r.totals.foreign_claims as f64),
    },
];

pub(super) const TAIL: &[Scalar] = &[
    Scalar {
        name: "rlbd_reasserts_total",
        kind: "counter",
        help: "Updates re-sent because the kernel's own ARP would have undone a move.",
        value: |r| Some(r.totals.reasserts as f64),
    },
    Scalar {
        name: "rlbd_updates_sent_total",
        kind: "counter",
        help: "ARP updates sent (first sends, repeats and re-assertions).",
        value: |r| Some(r.totals.updates_sent as f64),
    },
    Scalar {
        name: "rlbd_updates_suppressed_total",
        kind: "counter",
        help: "ARP updates not sent because a rate limit held them back.",
        value: |r| Some(r.totals.updates_suppressed as f64),
    },
    Scalar {
        name: "rlbd_updates_deferred_total",
        kind: "counter",
        help: "First updates of moves that waited for their turn under the total rate limit \
               (sent late, not lost).",
        value: |r| Some(r.totals.updates_deferred as f64),
    },
];

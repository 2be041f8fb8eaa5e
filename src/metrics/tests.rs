use super::*;
use crate::status::{ClientStatus, MoveStatus, PortState, PortStatus, Totals, SCHEMA_VERSION};

pub(crate) fn sample_report() -> StatusReport {
    let port = |name: &str, rx: Option<f64>| PortStatus {
        name: name.into(),
        ifindex: 2,
        mac: "02:00:00:00:00:01".into(),
        state: PortState::Up,
        capacity_bps: 1e8,
        rx_bps: rx,
        utilization: rx.map(|r| r / 1e8),
        rx_bytes: rx.map(|_| 123_456_789),
        window: "xx.".into(),
        overloaded: rx.is_some(),
        ring_packets: 10,
        ring_drops: 1,
        clients: 1,
        sampling: 1,
        counting: crate::status::Counting::Exact,
        counting_hook: None,
        no_move: None,
        uncounted_frames: 0,
        counted_bytes: 0,
        guests: 0,
    };
    StatusReport {
        schema: SCHEMA_VERSION,
        version: "0.1.0".into(),
        mode: crate::status::Mode::Ports,
        name: "we\"ird\\na\nme".into(),
        dry_run: false,
        uptime_secs: 42,
        tick: 41,
        threshold: 0.8,
        window: 3,
        hits: 2,
        hold_down_secs: 30,
        saturated: 0.96,
        max_fill: 0.95,
        saturation_ceiling: Some(0.97),
        ports: vec![port("p0", Some(95e6)), port("p1", None)],
        clients: vec![ClientStatus {
            ip: "198.18.0.13".into(),
            mac: "02:00:c6:12:00:03".into(),
            vlan: 0,
            port: "p1".into(),
            rate_bps: 9e7,
            last_seen_secs_ago: 0,
            moved: Some(MoveStatus {
                to: "p1".into(),
                secs_ago: 3,
                reason: crate::status::Reason::Overload,
                hold_down_left_secs: 27,
                reasserts: 2,
                addresses: vec!["198.18.0.1".into()],
            }),
            pinned: None,
            excluded: false,
        }],
        totals: Totals {
            moves_overload: 1,
            updates_sent: 5,
            clients_tracked: 1,
            clients_moved: 1,
            table_capacity: 4096,
            ..Default::default()
        },
        guests: Vec::new(),
        guest_totals: crate::guests::GuestTotals {
            overload: 2,
            ..Default::default()
        },
    }
}

#[test]
fn families_have_help_and_type_and_labels_are_escaped() {
    let text = render(&sample_report());
    let bond = r#"bond="we\"ird\\na\nme""#;
    assert!(text.contains("# TYPE rlbd_moves_total counter\n"));
    assert!(text.contains(&format!(
        "rlbd_guest_moves_total{{{bond},reason=\"overload\"}} 2\n"
    )));
    assert!(text.contains(&format!("rlbd_port_guests{{{bond},port=\"p0\"}} 0\n")));
    assert!(text.contains(&format!(
        "rlbd_moves_total{{{bond},reason=\"overload\"}} 1\n"
    )));
    // 100 Mbit/s in bytes per second.
    assert!(text.contains(&format!(
        "rlbd_port_capacity_bytes{{{bond},port=\"p0\"}} 12500000\n"
    )));
    assert!(text.contains(&format!(
        "rlbd_port_utilization_ratio{{{bond},port=\"p0\"}} 0.95\n"
    )));
    assert!(text.contains(&format!("rlbd_uptime_seconds{{{bond}}} 42\n")));
    // No reading: no sample, rather than a misleading 0.
    assert!(text.contains("rlbd_port_rx_bytes_total{"));
    assert!(!text.contains("port=\"p1\"} 123456789"));
    assert!(!text.contains("rlbd_port_rx_bytes_total{{{bond},port=\"p1\"}}"));
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        assert!(line.contains(&format!("{{{bond}")), "no bond label: {line}");
        let name = line.split(['{', ' ']).next().unwrap();
        assert!(
            text.contains(&format!("# TYPE {name} ")),
            "{name} has no TYPE line"
        );
    }
    assert_eq!(number(f64::INFINITY), "+Inf");
    assert_eq!(number(1e21), "1000000000000000000000");
}

#[test]
fn a_ceiling_not_learned_has_no_sample_and_sampling_is_a_ratio() {
    let mut r = sample_report();
    let text = render(&r);
    assert!(text.contains("rlbd_saturation_ceiling_ratio{bond="));
    r.saturation_ceiling = None;
    r.ports[0].sampling = 4;
    let text = render(&r);
    assert!(!text.contains("NaN"), "{text}");
    assert!(text.contains("# TYPE rlbd_saturation_ceiling_ratio gauge\n"));
    assert!(!text.contains("rlbd_saturation_ceiling_ratio{"));
    let bond = r#"bond="we\"ird\\na\nme""#;
    assert!(text.contains(&format!(
        "rlbd_port_sampling_ratio{{{bond},port=\"p0\"}} 0.25\n"
    )));
    assert!(text.contains(&format!(
        "rlbd_port_sampling_ratio{{{bond},port=\"p1\"}} 1\n"
    )));
}

use super::*;
use crate::metrics::tests::sample_report;

#[test]
fn bar_and_units() {
    assert_eq!(bar(Some(0.52), 10), "[#####.....]");
    assert_eq!(bar(Some(1.7), 10), "[##########]");
    assert_eq!(bar(Some(-0.1), 4), "[....]");
    assert_eq!(bar(None, 4), "[----]");
    assert_eq!(rate(95.1e6), "95.1 Mbit/s");
    assert_eq!(rate(2.5e9), "2.5 Gbit/s");
    assert_eq!(rate(0.0), "0.0 bit/s");
    assert_eq!(duration(42), "42 s");
    assert_eq!(duration(185), "3m 05s");
    assert_eq!(duration(7380), "2h 03m");
}

#[test]
fn text_names_ports_bars_clients_and_totals() {
    let mut r = sample_report();
    let text = render_text(&r, Some(10));
    assert!(text.contains("p0") && text.contains("p1"), "{text}");
    assert!(text.contains("[##########]  95%"), "{text}");
    assert!(text.contains("[----------]    -"), "{text}");
    assert!(text.contains("xx. overloaded"), "{text}");
    assert!(
        text.contains("to p1 3 s ago (overload), held 27 s more, re-asserted 2 times"),
        "{text}"
    );
    assert!(
        text.contains("moves 1 (overload 1, failover 0, placement 0, room 0, settle 0)"),
        "{text}"
    );
    let mut c = r.clients[0].clone();
    c.moved = None;
    c.ip = "198.18.0.11".into();
    r.clients.push(c);
    let text = render_text(&r, Some(1));
    assert!(text.contains("2 tracked, the 1 busiest shown"), "{text}");
    assert!(!text.contains("198.18.0.11"), "{text}");
    assert!(render_text(&r, None).contains("198.18.0.11"));
}

#[test]
fn text_shows_vlans_claimed_addresses_and_why_nothing_moved() {
    let mut r = sample_report();
    r.clients[0].vlan = 100;
    if let Some(m) = r.clients[0].moved.as_mut() {
        m.addresses = vec!["198.18.100.1".into(), "198.18.100.2".into()];
    }
    r.ports[0].no_move = Some("one client (02:00:00:00:00:01) carries 95.0 Mbit/s of it".into());
    let text = render_text(&r, None);
    assert!(text.contains(" VLAN "), "{text}");
    assert!(text.contains(" 100 "), "{text}");
    assert!(text.contains("for 198.18.100.1 198.18.100.2"), "{text}");
    assert!(
        text.contains("p0: overloaded, nothing moved: one client (02:00:00:00:00:01) carries"),
        "{text}"
    );
}

#[test]
fn finds_the_only_socket_or_names_the_choices() {
    let dir = std::env::temp_dir().join(format!("rlbd-sv-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let e = find_socket(&dir, None, None).unwrap_err();
    assert_eq!(e.code, crate::exit::EX_UNAVAILABLE, "{e}");
    let _a = std::os::unix::net::UnixListener::bind(dir.join("bond0.sock")).unwrap();
    std::fs::write(dir.join("notasocket.sock"), "").unwrap();
    assert_eq!(
        find_socket(&dir, None, None).unwrap(),
        dir.join("bond0.sock")
    );
    let _b = std::os::unix::net::UnixListener::bind(dir.join("bond1.sock")).unwrap();
    let e = find_socket(&dir, None, None).unwrap_err().message;
    assert!(e.contains("bond0, bond1"), "{e}");
    assert_eq!(
        find_socket(&dir, Some("bond1"), None).unwrap(),
        dir.join("bond1.sock")
    );
    let e = find_socket(&dir, Some("bond7"), None).unwrap_err().message;
    assert!(e.contains("bond7") && e.contains("bond0, bond1"), "{e}");
    assert!(find_socket(&dir, Some("../x"), None).is_err());
    let explicit = Path::new("/some/where.sock");
    assert_eq!(
        find_socket(&dir, Some("bond7"), Some(explicit)).unwrap(),
        explicit
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_counted_column_names_ebpf_exact_and_sampled_ports() {
    let mut r = sample_report();
    r.ports[0].counting = crate::status::Counting::Ebpf;
    r.ports[1].counting = crate::status::Counting::Sampled;
    r.ports[1].sampling = 8;
    let text = render_text(&r, None);
    assert!(text.contains("COUNTED"), "{text}");
    let row = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_default()
            .to_string()
    };
    assert!(row("p0").contains(" ebpf "), "{text}");
    assert!(row("p1").contains(" 1/8 "), "{text}");
    // A counting map that was full says so.
    r.ports[0].uncounted_frames = 12;
    let full = render_text(&r, None);
    assert!(
        full.lines()
            .any(|l| l.starts_with("p0 ") && l.contains(" ebpf full")),
        "{full}"
    );
    r.ports[0].uncounted_frames = 0;
    r.ports[0].counting_hook = Some("tc".into());
    let tc = render_text(&r, None);
    assert!(
        tc.lines()
            .any(|l| l.starts_with("p0 ") && l.contains(" ebpf/tc ")),
        "{tc}"
    );
    // The tc program sampling: its ratio beside the hook.
    r.ports[0].sampling = 16;
    let sampled = render_text(&r, None);
    assert!(
        sampled
            .lines()
            .any(|l| l.starts_with("p0 ") && l.contains(" ebpf/tc 1/16 ")),
        "{sampled}"
    );
    r.ports[0].counting_hook = None;
    // An older report without the field: read from the ratio.
    r.ports[0].counting = crate::status::Counting::Unknown;
    r.ports[0].sampling = 1;
    let text = render_text(&r, None);
    assert!(
        text.lines()
            .any(|l| l.starts_with("p0 ") && l.contains(" all ")),
        "{text}"
    );
    let json = serde_json::to_string(&r).unwrap();
    let back: crate::status::StatusReport =
        serde_json::from_str(&json.replace(",\"counting\":\"\"", "")).unwrap();
    assert_eq!(back.ports[0].counting, crate::status::Counting::Unknown);
}

#[test]
fn text_marks_pinned_and_excluded_clients() {
    let mut r = sample_report();
    r.clients[0].pinned = Some("p1".into());
    let mut c = r.clients[0].clone();
    c.ip = "198.18.0.11".into();
    c.moved = None;
    c.pinned = None;
    c.excluded = true;
    r.clients.push(c);
    let mut c = r.clients[0].clone();
    c.ip = "198.18.0.12".into();
    c.moved = None;
    r.clients.push(c);
    let text = render_text(&r, None);
    assert!(
        text.contains("pinned to p1: to p1 3 s ago (overload)"),
        "{text}"
    );
    assert!(text.contains("excluded: never moved"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("198.18.0.12") && l.trim_end().ends_with("pinned to p1")),
        "{text}"
    );
    // The marks travel in the JSON, and an unmarked client's JSON is what it was.
    let json = serde_json::to_string(&r).unwrap();
    assert!(
        json.contains("\"pinned\":\"p1\"") && json.contains("\"excluded\":true"),
        "{json}"
    );
    let plain = serde_json::to_string(&sample_report()).unwrap();
    assert!(
        !plain.contains("pinned") && !plain.contains("excluded"),
        "{plain}"
    );
}

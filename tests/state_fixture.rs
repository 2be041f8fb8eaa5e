//! The state file across releases: `tests/fixtures/state-v1.json` was written by a real daemon
//! (tests/restart.rs's lab, `RLBD_KEEP_STATE`, 2026-12-05: a client moved to p1 by an overload,
//! then the daemon killed). This release must take it over as the daemon does at start: parse
//! it as the shell reads the file, and take its move over, re-asserted. A change of the format
//! bumps `STATE_VERSION` and keeps reading this one; this test says when it did not.

use std::net::{IpAddr, Ipv4Addr};

use rlbd::config::{Settings, Target};
use rlbd::engine::{Engine, Input, Output, Persisted, SendTag, Topic};
use rlbd::netlink::{AddrEntry, LinkInfo, LinkKind, NeighEntry, NlEvent};
use rlbd::Mac;

const FIXTURE: &str = include_str!("fixtures/state-v1.json");
const CLIENT: Mac = Mac(0x02, 0x00, 0xc6, 0x12, 0x00, 0x01);

fn settings() -> Settings {
    Settings {
        capacity_mbps: [("p0".to_string(), 40.0), ("p1".to_string(), 40.0)].into(),
        ..Settings::for_target(Target::Ports(vec!["p0".into(), "p1".into()]))
    }
}

/// The lab's host as netlink tells it: two ports carrying the server's address, the client
/// confirmed.
fn host() -> Vec<NlEvent> {
    let port = |index: u32, name: &str| {
        NlEvent::Link(LinkInfo {
            index,
            name: name.into(),
            mac: Some(Mac(2, 0, 0, 0, 1, index as u8)),
            admin_up: true,
            oper_up: true,
            kind: Some(LinkKind::Veth),
            ..LinkInfo::default()
        })
    };
    let addr = |ifindex: u32| {
        NlEvent::Addr(AddrEntry {
            ifindex,
            network: "198.18.0.1/24".parse().unwrap(),
        })
    };
    vec![
        port(2, "p0"),
        port(3, "p1"),
        addr(2),
        addr(3),
        NlEvent::Neigh(NeighEntry {
            ifindex: 2,
            ip: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 11)),
            mac: Some(CLIENT),
            state: libc::NUD_REACHABLE,
        }),
    ]
}

#[test]
fn this_releases_state_file_is_taken_over() {
    let state: Persisted = serde_json::from_str(FIXTURE).expect("the fixture parses");
    assert_eq!(
        state.version,
        rlbd::engine::STATE_VERSION,
        "a new format must still read v1"
    );
    let now = state.written_ms + 2_000;
    let mut e = Engine::new(settings(), now - 5_000);
    e.handle(now, Input::Netlink(&host()));
    let mut restored = None;
    let mut updates = Vec::new();
    let mut drain = |e: &mut Engine, now: u64| {
        while let Some(o) = e.poll_output() {
            match o {
                Output::OpenCapture { port } => e.handle(
                    now,
                    Input::CaptureOpened {
                        port: port.id,
                        speed_mbps: Some(40),
                        error: None,
                    },
                ),
                Output::Log {
                    topic: Topic::Restore,
                    text,
                    ..
                } => restored = Some(text),
                Output::Send { port, tag, frame } => {
                    if let SendTag::Update { client, .. } = tag {
                        updates.push((port.id.index(), client.mac));
                    }
                    let input = Input::SendResult {
                        tag,
                        frame,
                        result: Ok(()),
                    };
                    e.handle(now, input);
                }
                _ => {}
            }
        }
    };
    drain(&mut e, now);
    let file = "tests/fixtures/state-v1.json".to_string();
    e.handle(
        now,
        Input::Restore {
            state: Box::new(state),
            file,
        },
    );
    drain(&mut e, now);
    for t in 1..=5 {
        e.handle(now + t * 100, Input::Deadline);
        drain(&mut e, now + t * 100);
    }
    let text = restored.expect("a restore line");
    assert!(text.contains("1 moves taken over"), "{text}");
    // The move is re-asserted: the client told again that the server is at p1 (index 1).
    assert!(updates.contains(&(1, CLIENT)), "{updates:?}");
}

//! Feeds arbitrary bytes, as one rtnetlink datagram, through the daemon's own framing and link,
//! address and neighbour decoders (`netlink::decode_datagram`), then applies the events to a
//! `HostView` the way the daemon does, checking the view's answers stay consistent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rlbd::config::Target;
use rlbd::client::ClientKey;
use rlbd::host::{HostView, Talk};
use rlbd::netlink::{decode_datagram, NlEvent};

fuzz_target!(|data: &[u8]| {
    let events = decode_datagram(data);
    let mut view = HostView::new(Target::Ports(vec!["p0".into(), "p1".into()]));
    for ev in &events {
        view.apply(ev);
        if let NlEvent::Neigh(n) | NlEvent::NeighRemoved(n) = ev {
            if let Some(mac) = n.mac {
                // The lookups the steering core makes must answer, whatever the table holds.
                let key = ClientKey::untagged(mac);
                let confirmed = view.confirms(key, n.ip);
                assert!(!confirmed || view.knows(key));
                let _ = view.claims_for(key, &Talk::default());
            }
        }
    }
    for ip in view.our_addresses() {
        assert!(view.is_ours(ip));
    }
});

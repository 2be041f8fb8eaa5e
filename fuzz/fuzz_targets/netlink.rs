//! Feeds arbitrary bytes, as one rtnetlink datagram, through the daemon's own framing and link,
//! address and neighbour decoders (`netlink::decode_datagram`), then applies the events to a
//! `HostView` the way the daemon does, checking the view's answers stay consistent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rlbd::config::Target;
use rlbd::host::HostView;
use rlbd::netlink::{decode_datagram, NlEvent};

fuzz_target!(|data: &[u8]| {
    let events = decode_datagram(data);
    let mut view = HostView::new(Target::Ports(vec!["p0".into(), "p1".into()]));
    for ev in &events {
        view.apply(ev);
        if let NlEvent::Neigh(n) = ev {
            // The view holds a neighbour only when the kernel confirmed it on a host interface.
            if let Some(mac) = n.mac {
                if view.confirms(mac, n.ip) {
                    assert!(n.is_confirmed());
                    assert!(view.is_host_if(n.ifindex) || view.knows(mac));
                }
            }
        }
        if let NlEvent::NeighRemoved(n) = ev {
            if let Some(mac) = n.mac {
                // Removed on this interface; another interface may still hold it.
                let _ = view.confirms(mac, n.ip);
            }
        }
    }
    for ip in view.our_addresses() {
        assert!(view.is_ours(ip));
    }
});

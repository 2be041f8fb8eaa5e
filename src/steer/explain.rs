//! Why an overloaded port kept its load: the first question an operator asks, answered in words
//! from the same snapshot the planner saw. Pure; the engine logs a reason once per episode of
//! overload (again only when it changes, at debug; `engine::second`), and the status shows it.

use super::core::{ClientSnap, PortIndex};
use crate::host::HostView;
use crate::policy::{PolicyConfig, PortView};

/// What the explanation may look at besides the snapshot.
pub struct Facts<'a> {
    pub host: &'a HostView,
    pub policy: &'a PolicyConfig,
    /// True for a client moved less than the hold-down ago.
    pub held: &'a dyn Fn(&ClientSnap) -> bool,
}

/// The reason port `hot` (overloaded, nothing moved off it this round) keeps its load.
pub fn no_move(hot: PortIndex, ports: &[PortView], clients: &[ClientSnap], f: &Facts) -> String {
    let Some(port) = ports.get(hot) else {
        return "the port is gone".into();
    };
    let floor = f.policy.min_rate_bps();
    // As the planner reads it: under a sampled port's resolution a reading is noise, 0.
    let rate = |c: &ClientSnap| port.resolved(c.rate_bps);
    let mut on: Vec<&ClientSnap> = clients
        .iter()
        .filter(|c| c.port == hot && rate(c) >= floor)
        .collect();
    on.sort_by(|a, b| rate(b).total_cmp(&rate(a)));
    if on.is_empty() {
        return format!(
            "no client traffic measured on it ({:.1} Mbit/s arrives): it goes to addresses or MACs \
             that are not the server's interfaces on the bond, or is not IP",
            port.rx_bps / 1e6
        );
    }
    if let [only] = on[..] {
        return format!(
            "one client ({}) carries {:.1} Mbit/s of it: moving it would only move the overload",
            only.key,
            rate(only) / 1e6
        );
    }
    let elephant = f.policy.threshold * port.capacity_bps;
    if on.iter().all(|c| rate(c) >= elephant) {
        return format!(
            "every client there alone exceeds {:.0}% of a port",
            f.policy.threshold * 100.0
        );
    }
    let free: Vec<&&ClientSnap> = on.iter().filter(|c| !(f.held)(c)).collect();
    let mut unclaimable = None;
    let mut claimable = 0;
    for c in &free {
        match f.host.claims_for(c.key, &c.talk) {
            Ok(_) => claimable += 1,
            Err(e) => {
                unclaimable.get_or_insert((c.key, e));
            }
        }
    }
    // One client always stays on the hot port: a single movable one is as good as none.
    if claimable <= 1 {
        if let Some((key, e)) = unclaimable {
            return format!("client {key} cannot be moved whole: {e}");
        }
        return format!(
            "{} of its {} clients were moved less than {} s ago (hold-down)",
            on.len() - free.len(),
            on.len(),
            f.policy.hold_down
        );
    }
    "no port has room: each move would overload its target or gain too little".into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{ClientKey, ServerSet};
    use crate::host::testing::*;
    use crate::host::Talk;
    use crate::Mac;

    fn port(rx: f64) -> PortView {
        PortView {
            capacity_bps: 100e6,
            up: true,
            rx_bps: rx,
            overloaded: rx > 80e6,
            resolution_bps: 0.0,
        }
    }

    fn snap(mac: Mac, rate: f64, talk: Talk) -> ClientSnap {
        ClientSnap {
            key: ClientKey::untagged(mac),
            port: 0,
            rate_bps: rate,
            quiet_secs: 0,
            talk,
        }
    }

    fn client_talk() -> Talk {
        let mut servers = ServerSet::default();
        servers.note(SERVER.into(), 0, 0);
        Talk {
            v4: Some(CLIENT_IP),
            v6: None,
            servers,
        }
    }

    fn explain(clients: &[ClientSnap], held: bool) -> String {
        explain_on(port(95e6), clients, held)
    }

    fn explain_on(hot: PortView, clients: &[ClientSnap], held: bool) -> String {
        let host = view();
        let policy = PolicyConfig::default();
        let held = move |_: &ClientSnap| held;
        let f = Facts {
            host: &host,
            policy: &policy,
            held: &held,
        };
        no_move(0, &[hot, port(10e6)], clients, &f)
    }

    #[test]
    fn each_reason_in_words() {
        assert!(explain(&[], false).starts_with("no client traffic measured"));
        let one = [snap(CLIENT, 90e6, client_talk())];
        assert!(explain(&one, false).starts_with("one client (02:00:00:00:00:c1) carries 90.0"));
        // Two clients, one the kernel does not confirm: that leaves one, which stays.
        let stranger = snap(Mac(2, 9, 9, 9, 9, 9), 40e6, client_talk());
        let two = [snap(CLIENT, 50e6, client_talk()), stranger];
        let msg = explain(&two, false);
        assert_eq!(
            msg,
            "client 02:09:09:09:09:09 cannot be moved whole: no confirmed neighbour entry"
        );
        let both = [
            snap(CLIENT, 50e6, client_talk()),
            snap(CLIENT, 45e6, client_talk()),
        ];
        assert!(explain(&both, true).contains("hold-down"));
        assert!(explain(&both, false).starts_with("no port has room"));
    }

    #[test]
    fn a_reading_under_a_sampled_ports_resolution_counts_as_the_planner_counts_it() {
        // Sampled 1 in 64: a client kept fewer than 8 times a second reads 0 to the planner, so
        // the explanation does not offer it as a second client that could have moved.
        let sampled = PortView {
            resolution_bps: 5e6,
            ..port(95e6)
        };
        let clients = [
            snap(CLIENT, 90e6, client_talk()),
            snap(Mac(2, 9, 9, 9, 9, 9), 2e6, client_talk()),
        ];
        assert!(explain_on(sampled, &clients, false).starts_with("one client (02:00:00:00:00:c1)"));
        assert!(explain(&clients, false).starts_with("client 02:09:09:09:09:09 cannot"));
    }
}

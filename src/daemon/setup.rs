//! Start-up: find the bond or ports, check what would make rlbd useless or harmful (and say
//! which sysctl or option to change), open the sockets. Also `sd_notify`, which needs no crate.

use std::time::{Duration, Instant};

use log::warn;
use mio::Poll;

use std::path::PathBuf;

use super::captures::Captures;
use super::counting::CountingInput;
use super::edge::Edge;
use super::netlink::NetlinkReader;
use super::state_file::StateFile;
use super::{monotonic_ms, Daemon, Reload, CAPTURE_BASE};
use crate::capture::RingConfig;
use crate::config::{Settings, Target};
use crate::engine::Engine;
use crate::exit::Failure;
use crate::netlink::{BondMode, LinkKind, RouteSocket, Snapshot};

/// Tells systemd (Type=notify) how we are; a no-op outside systemd.
pub fn sd_notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let sock = match std::os::unix::net::UnixDatagram::unbound() {
        Ok(s) => s,
        Err(_) => return,
    };
    let bytes = path.as_encoded_bytes();
    let res = if let Some(abstract_name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(abstract_name)
            .and_then(|a| sock.send_to_addr(state.as_bytes(), &a))
    } else {
        sock.send_to(state.as_bytes(), &path)
    };
    if let Err(e) = res {
        log::debug!("sd_notify: {e}");
    }
}

pub(super) fn check_bond(name: &str, snap: &crate::netlink::Snapshot) -> Result<BondMode, Failure> {
    let Some(link) = snap.links.iter().find(|l| l.name == name) else {
        return Err(Failure::unavailable(format!(
            "bond {name} does not exist (ip link show {name})"
        )));
    };
    if link.kind != Some(LinkKind::Bond) {
        return Err(Failure::config(format!(
            "{name} is not a bond (its kind is {}); use --ports for plain ports",
            link.kind.as_ref().map_or("unknown", LinkKind::as_str)
        )));
    }
    let Some(info) = &link.bond else {
        return Err(Failure::config(format!(
            "bond {name}: the kernel reported no bonding mode"
        )));
    };
    if let Some(why) = arp_validate_refused(name, info) {
        return Err(Failure::config(why));
    }
    match info.mode {
        BondMode::BalanceAlb => Ok(info.mode),
        BondMode::BalanceTlb if info.all_slaves_active == Some(true) => Ok(info.mode),
        BondMode::BalanceTlb => Err(Failure::config(format!(
            "bond {name} is in balance-tlb with all_slaves_active=0: the driver drops frames that arrive on inactive slaves, so clients cannot be moved; set it with `ip link set {name} type bond all_slaves_active 1`, or use balance-alb"
        ))),
        _ => Err(Failure::config(format!(
            "bond {name} is in mode {}: rlbd steers receive traffic by ARP, which only balance-alb (mode 6), or balance-tlb (mode 5) with all_slaves_active=1, deliver on every slave; set `mode balance-alb`",
            info.mode
        ))),
    }
}

/// Why a bond with `arp_validate` set cannot be steered, and what to change. ARP validation
/// belongs to active-backup's ARP monitoring: with it the bond's receive hook is the validator's
/// rather than balance-alb's ARP learning. Today's kernels refuse the option on balance-alb and
/// balance-tlb and clear it on a mode change (bond_options.c); a bond that still reports it was
/// made some other way, and the mode set again (or the bond made again) clears it.
pub(super) fn arp_validate_refused(name: &str, info: &crate::netlink::BondInfo) -> Option<String> {
    let v = info.arp_validate.filter(|v| *v != 0)?;
    let word = match v {
        1 => "active",
        2 => "backup",
        3 => "all",
        4 => "filter",
        5 => "filter_active",
        6 => "filter_backup",
        _ => "set",
    };
    Some(format!(
        "bond {name} has arp_validate {word} ({v}): ARP validation is active-backup's ARP \
         monitoring, which balance-alb and balance-tlb do not have, and rlbd needs the bond's own \
         ARP handling; clear it by setting the mode again with no slaves (ip link set {name} \
         down; ip link set {name} type bond mode balance-alb: a mode change resets \
         arp_validate) or by making the bond again, and drop it from the bond's configuration \
         (networkd ARPValidate=, ifupdown bond-arp-validate, NetworkManager arp_validate)"
    ))
}

/// Ports mode: what the kernel would do to traffic arriving on a second port.
fn check_port_sysctls(name: &str) -> Result<(), Failure> {
    let read = |iface: &str, key: &str| crate::netlink::read_ipv4_conf(iface, key).ok();
    // The kernel uses the larger of the interface's and `all`'s value.
    let rp = read(name, "rp_filter")
        .unwrap_or(0)
        .max(read("all", "rp_filter").unwrap_or(0));
    if rp == 1 {
        return Err(Failure::config(format!(
            "port {name}: strict reverse-path filtering (net.ipv4.conf.{name}.rp_filter or net.ipv4.conf.all.rp_filter = 1) drops what arrives on a port the route does not leave by; set both to 2 (loose), e.g. sysctl -w net.ipv4.conf.all.rp_filter=2 net.ipv4.conf.{name}.rp_filter=2"
        )));
    }
    let ai = read(name, "arp_ignore")
        .unwrap_or(0)
        .max(read("all", "arp_ignore").unwrap_or(0));
    if ai == 0 {
        warn!(
            "port {name}: net.ipv4.conf.{name}.arp_ignore=0: every port answers ARP for the shared address, so a new client lands on whichever answer it takes first; rlbd rebalances either way, but for a predictable first placement set net.ipv4.conf.{name}.arp_ignore=8 on every port but one"
        );
    }
    Ok(())
}

/// Ports mode: every port exists, carries an IPv4 address and passes the sysctl checks.
fn check_ports(names: &[String], snap: &Snapshot) -> Result<(), Failure> {
    for name in names {
        let Some(link) = snap.links.iter().find(|l| &l.name == name) else {
            return Err(Failure::unavailable(format!("unknown interface {name}")));
        };
        let has_v4 = snap
            .addrs
            .iter()
            .any(|a| a.ifindex == link.index && a.network.is_ipv4());
        if !has_v4 {
            return Err(Failure::config(format!("port {name} has no IPv4 address: in ports mode every port carries the server's address")));
        }
        check_port_sysctls(name)?;
    }
    if let Some(dup) = names
        .iter()
        .enumerate()
        .find(|(i, n)| names[..*i].contains(n))
        .map(|(_, n)| n)
    {
        return Err(Failure::config(format!("--ports names {dup} twice")));
    }
    if names.len() < 2 {
        return Err(Failure::config("--ports needs at least two interfaces"));
    }
    Ok(())
}

/// Where the state file goes: `--state-file` (empty: none), else under systemd's runtime
/// directory (`RuntimeDirectory=rlbd`: `/run/rlbd/NAME.state`), else none.
fn state_path(given: Option<PathBuf>, target: &Target) -> Option<PathBuf> {
    if let Some(p) = given {
        return (!p.as_os_str().is_empty()).then_some(p);
    }
    let dir = std::env::var_os("RUNTIME_DIRECTORY")?;
    // systemd may list several directories, colon-separated: the first is ours.
    let dir = dir.to_string_lossy().split(':').next()?.to_string();
    let name = match target {
        Target::Bond(b) => b.clone(),
        Target::Ports(p) => p.first().cloned().unwrap_or_default(),
    };
    Some(PathBuf::from(dir).join(format!("{name}.state")))
}

pub fn build(
    settings: Settings,
    reload: Reload,
    state: Option<PathBuf>,
) -> Result<Daemon, Failure> {
    let Some(target) = settings.target.clone() else {
        return Err(Failure::config("nothing to steer: give --bond NAME or --ports IF,IF (or bond/ports in the configuration file)"));
    };
    let mut nl =
        RouteSocket::open().map_err(|e| Failure::io("cannot open the rtnetlink socket", e))?;
    let snap = nl
        .snapshot()
        .map_err(|e| Failure::io("cannot read links, addresses and neighbours", e))?;
    match &target {
        Target::Bond(name) => {
            check_bond(name, &snap)?;
        }
        Target::Ports(names) => check_ports(names, &snap)?,
    }
    let ring = RingConfig {
        block_size: settings.capture.ring_block_kib * 1024,
        block_count: settings.capture.ring_blocks,
        ..RingConfig::default()
    };
    let poll = Poll::new().map_err(|e| Failure::io("cannot create the event loop", e))?;
    let map_entries = crate::capture::ebpf::map_entries(settings.capture.table_size);
    let captures = Captures::new(ring, CAPTURE_BASE, map_entries);
    let state = StateFile::new(state_path(state, &target));
    let edge = Edge::new(poll, NetlinkReader::new(nl), captures, state);
    let mut d = Daemon {
        reload,
        edge,
        counting: CountingInput::default(),
        next_second: Instant::now() + Duration::from_secs(1),
        watchdog: std::env::var_os("WATCHDOG_USEC").is_some(),
        observability: settings.observability.clone(),
        stashed: Vec::new(),
        engine: Engine::new(settings, monotonic_ms()),
    };
    d.start(snap)?;
    Ok(d)
}

#[cfg(test)]
mod arp_validate_tests {
    use super::arp_validate_refused;
    use crate::netlink::{BondInfo, BondMode};

    fn info(arp_validate: Option<u32>) -> BondInfo {
        BondInfo {
            mode: BondMode::BalanceAlb,
            all_slaves_active: None,
            arp_validate,
        }
    }

    #[test]
    fn arp_validate_set_is_refused_with_what_to_change() {
        assert_eq!(arp_validate_refused("bond0", &info(None)), None);
        assert_eq!(arp_validate_refused("bond0", &info(Some(0))), None);
        let why = arp_validate_refused("bond-san", &info(Some(3))).unwrap();
        assert!(
            why.starts_with("bond bond-san has arp_validate all (3): "),
            "{why}"
        );
        assert!(
            why.contains("ip link set bond-san type bond mode balance-alb"),
            "{why}"
        );
        assert!(why.contains("ARPValidate="), "{why}");
        let why = arp_validate_refused("b", &info(Some(6))).unwrap();
        assert!(why.contains("arp_validate filter_backup (6)"), "{why}");
    }
}

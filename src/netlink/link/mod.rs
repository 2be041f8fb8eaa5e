//! Decoding of RTM_NEWLINK / RTM_DELLINK into [`LinkInfo`].
//!
//! Attributes are decoded one at a time instead of through `LinkMessage::parse`: that parser
//! rejects the whole message when any single attribute fails (a newer kernel than the crate
//! knows can do that with attributes we never look at), and losing a link's counters or its
//! removal over an irrelevant attribute would be far worse than skipping the attribute.
//!
//! IFLA_LINKINFO is decoded by hand, never by the crate: its nest holds per-kind data for every
//! link type the kernel has (bareudp, geneve, ...), which the crate parses whole, and some of
//! those parsers panic on a short value (the fuzzer found one in bareudp's). rlbd reads a few
//! fields of three kinds (bond, VLAN, bridge) from it.

mod kind;
pub use kind::LinkKind;

use log::debug;
use netlink_packet_core::{
    parse_string, parse_u16, parse_u32, parse_u8, DecodeError, NlaBuffer, NlasIterator,
    ParseableParametrized, NLA_HEADER_SIZE,
};
pub use netlink_packet_route::link::BondMode;
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkHeader, State};
use netlink_packet_route::AddressFamily;

pub use crate::Mac;

/// One network interface as the kernel describes it in RTM_NEWLINK.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LinkInfo {
    pub index: u32,
    pub name: String,
    /// Current hardware address; `None` when the device has none or it is not 6 bytes long.
    pub mac: Option<Mac>,
    /// IFF_UP: the administrator enabled the device.
    pub admin_up: bool,
    /// Carrier present: operstate UP, or IFF_LOWER_UP when the driver reports no operstate
    /// (operstate UNKNOWN).
    pub oper_up: bool,
    /// IFLA_MASTER: the ifindex of the bond (or bridge, VRF...) this device is enslaved to: a
    /// bridge port's bridge, a bond slave's bond.
    pub master: Option<u32>,
    /// IFLA_INFO_KIND, e.g. "bond", "bridge", "veth", "macvlan", "tun" (tap devices too),
    /// "vlan", "vxlan", "openvswitch". `None` for plain hardware NICs.
    pub kind: Option<LinkKind>,
    /// IFLA_CARRIER_CHANGES: how often the carrier went down or came up since the device was
    /// made. A rise between two messages that both say "up" is a flap the daemon did not see
    /// (linkwatch coalesced it, or its messages were lost in an overrun).
    pub carrier_changes: Option<u32>,
    /// From IFLA_STATS64. The kernel sends these with every RTM_NEWLINK, dumps included.
    pub rx_bytes: Option<u64>,
    pub rx_packets: Option<u64>,
    /// Present when `kind` is "bond" and the kernel sent IFLA_INFO_DATA.
    pub bond: Option<BondInfo>,
    /// IFLA_LINK: the device this one is stacked on (a VLAN's, macvlan's or ipvlan's parent).
    pub parent: Option<u32>,
    /// Present when `kind` is "vlan": its tag and protocol.
    pub vlan: Option<VlanInfo>,
    /// Present when `kind` is "bridge" and the kernel sent IFLA_INFO_DATA.
    pub bridge: Option<BridgeInfo>,
}

impl LinkInfo {
    /// Becomes `l`, reusing its own strings' buffers.
    pub fn update_from(&mut self, l: &LinkInfo) {
        self.name.clone_from(&l.name);
        self.kind.clone_from(&l.kind);
        let (name, kind) = (std::mem::take(&mut self.name), self.kind.take());
        *self = LinkInfo {
            name: String::new(),
            kind: None,
            ..*l
        };
        (self.name, self.kind) = (name, kind);
    }
}

/// A VLAN device's IFLA_INFO_DATA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanInfo {
    pub id: u16,
    /// 802.1ad (QinQ, TPID 0x88a8) rather than 802.1Q.
    pub ad: bool,
}

/// A bridge's IFLA_INFO_DATA, what its FDB entries mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BridgeInfo {
    /// IFLA_BR_VLAN_FILTERING: the FDB is keyed by VLAN too (entries carry NDA_VLAN).
    pub vlan_filtering: bool,
    /// IFLA_BR_VLAN_DEFAULT_PVID: the VLAN a new port's untagged frames are given (1 unless
    /// changed; 0 for none).
    pub default_pvid: Option<u16>,
    /// IFLA_BR_AGEING_TIME in hundredths of a second (clock_t): how long a learned entry lives
    /// without a frame from its MAC (300 s by default).
    pub ageing_time_cs: Option<u32>,
}

/// Bond master settings from IFLA_INFO_DATA of a "bond" link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BondInfo {
    pub mode: BondMode,
    /// IFLA_BOND_ALL_SLAVES_ACTIVE: balance-tlb delivers what arrives on every slave only with it.
    pub all_slaves_active: Option<bool>,
    /// IFLA_BOND_ARP_VALIDATE: 0 none, 1 active, 2 backup, 3 all, 4 filter, 5 filter_active,
    /// 6 filter_backup (active-backup's ARP monitoring; never set on a balance-alb/tlb bond).
    pub arp_validate: Option<u32>,
}

/// The change in a monotonically increasing counter between two samples.
///
/// `None` when the counter went backwards: the device was re-created, its driver reset its
/// statistics, or a 32-bit counter wrapped. The true delta is unknowable then, and reporting
/// `now` or a wrapped difference would look like a huge burst of traffic.
pub fn counter_delta(prev: u64, now: u64) -> Option<u64> {
    now.checked_sub(prev)
}

/// What an RTM_NEWLINK/RTM_DELLINK payload turned out to be.
#[derive(Debug)]
pub(crate) enum LinkMsg {
    Link(LinkInfo),
    /// Not about a network interface as such: AF_BRIDGE messages describe bridge-port state,
    /// and an AF_BRIDGE RTM_DELLINK means "no longer a bridge port", not "device gone".
    Ignored,
}

/// sizeof(struct ifinfomsg)
const IFINFOMSG_LEN: usize = 16;

const IFLA_ADDRESS: u16 = 1;
const IFLA_IFNAME: u16 = 3;
const IFLA_LINK: u16 = 5;
const IFLA_MASTER: u16 = 10;
const IFLA_OPERSTATE: u16 = 16;
const IFLA_LINKINFO: u16 = 18;
const IFLA_STATS64: u16 = 23;
const IFLA_CARRIER_CHANGES: u16 = 35;

const IFLA_INFO_KIND: u16 = 1;
const IFLA_INFO_DATA: u16 = 2;

const IFLA_BOND_MODE: u16 = 1;
const IFLA_BOND_ARP_VALIDATE: u16 = 9;
const IFLA_BOND_ALL_SLAVES_ACTIVE: u16 = 17;

const IFLA_VLAN_ID: u16 = 1;
const IFLA_VLAN_PROTOCOL: u16 = 5;
const ETH_P_8021AD: u16 = 0x88a8;

const IFLA_BR_AGEING_TIME: u16 = 4;
const IFLA_BR_VLAN_FILTERING: u16 = 7;
const IFLA_BR_VLAN_DEFAULT_PVID: u16 = 39;

pub(crate) fn mac_from_slice(bytes: &[u8]) -> Option<Mac> {
    <[u8; 6]>::try_from(bytes).ok().map(Mac::from)
}

/// Decodes the payload (after the netlink header) of an RTM_NEWLINK or RTM_DELLINK.
pub(crate) fn parse_link(payload: &[u8]) -> Result<LinkMsg, DecodeError> {
    let header = LinkHeader::parse(payload)?;
    if header.interface_family != AddressFamily::Unspec {
        return Ok(LinkMsg::Ignored);
    }
    let family = header.interface_family;
    let mut info = LinkInfo {
        index: header.index,
        admin_up: header.flags.contains(LinkFlags::Up),
        ..LinkInfo::default()
    };
    let mut operstate = None;

    let attrs = payload.get(IFINFOMSG_LEN..).unwrap_or_default();
    for nla in NlasIterator::new(attrs) {
        let nla = match nla {
            Ok(nla) => nla,
            Err(e) => {
                // The iterator cannot resynchronise after a bad length; keep what we have.
                debug!("link {}: truncated attribute list: {e}", info.index);
                break;
            }
        };
        let kind = nla.kind();
        if kind == IFLA_LINKINFO {
            apply_link_info(&mut info, nla.value());
            continue;
        }
        if !matches!(
            kind,
            IFLA_ADDRESS
                | IFLA_IFNAME
                | IFLA_LINK
                | IFLA_MASTER
                | IFLA_OPERSTATE
                | IFLA_STATS64
                | IFLA_CARRIER_CHANGES
        ) {
            continue;
        }
        match LinkAttribute::parse_with_param(&nla, family) {
            Ok(LinkAttribute::IfName(name)) => info.name = name,
            Ok(LinkAttribute::Address(bytes)) => info.mac = mac_from_slice(&bytes),
            // The crate calls IFLA_MASTER "Controller".
            Ok(LinkAttribute::Controller(master)) => info.master = (master != 0).then_some(master),
            // A device can name itself as its own link (real NICs do): that is no parent.
            Ok(LinkAttribute::Link(link)) => {
                info.parent = (link != 0 && link != header.index).then_some(link)
            }
            Ok(LinkAttribute::OperState(state)) => operstate = Some(state),
            Ok(LinkAttribute::CarrierChanges(n)) => info.carrier_changes = Some(n),
            Ok(LinkAttribute::Stats64(stats)) => {
                info.rx_bytes = Some(stats.rx_bytes);
                info.rx_packets = Some(stats.rx_packets);
            }
            Ok(other) => debug!("link {}: unexpected attribute {other:?}", info.index),
            Err(e) => debug!("link {}: skipping attribute {kind}: {e}", info.index),
        }
    }

    info.oper_up = match operstate {
        Some(State::Up) => true,
        // Drivers without operstate support (and loopback) leave it UNKNOWN; the carrier flag
        // is then the only signal.
        Some(State::Unknown) | None => header.flags.contains(LinkFlags::LowerUp),
        Some(_) => false,
    };
    Ok(LinkMsg::Link(info))
}

/// Decodes the few IFLA_LINKINFO fields rlbd needs straight from the wire, one attribute at a
/// time: an option the crate would validate more strictly than the running kernel encodes it
/// (or not know at all) costs nothing here.
fn apply_link_info(info: &mut LinkInfo, nest: &[u8]) {
    let mut kind = None;
    let mut data = None;
    for nla in NlasIterator::new(nest).map_while(Result::ok) {
        match nla.kind() {
            IFLA_INFO_KIND => kind = parse_string(nla.value()).ok(),
            IFLA_INFO_DATA => data = Some(owned_value(nla)),
            _ => {}
        }
    }
    let kind = kind.as_deref().map(LinkKind::from);
    match (&kind, data) {
        (Some(LinkKind::Bond), Some(data)) => info.bond = bond_info(data),
        (Some(LinkKind::Vlan), Some(data)) => info.vlan = vlan_info(data),
        (Some(LinkKind::Bridge), Some(data)) => info.bridge = bridge_info(data),
        _ => {}
    }
    info.kind = kind;
}

/// The value of an attribute, borrowed from the message rather than from the `NlaBuffer`.
fn owned_value(nla: NlaBuffer<&[u8]>) -> &[u8] {
    let len = usize::from(nla.length());
    nla.into_inner()
        .get(NLA_HEADER_SIZE..len)
        .unwrap_or_default()
}

fn bond_info(data: &[u8]) -> Option<BondInfo> {
    let mut mode = None;
    let mut all_slaves_active = None;
    let mut arp_validate = None;
    for nla in NlasIterator::new(data).map_while(Result::ok) {
        let value = nla.value();
        match nla.kind() {
            IFLA_BOND_MODE => mode = parse_u8(value).ok().map(BondMode::from),
            IFLA_BOND_ALL_SLAVES_ACTIVE => all_slaves_active = parse_u8(value).ok().map(|v| v != 0),
            IFLA_BOND_ARP_VALIDATE => arp_validate = parse_u32(value).ok(),
            _ => {}
        }
    }
    // Without the mode the rest is useless to the caller; a default would claim balance-rr.
    Some(BondInfo {
        mode: mode?,
        all_slaves_active,
        arp_validate,
    })
}

fn vlan_info(data: &[u8]) -> Option<VlanInfo> {
    let mut id = None;
    let mut ad = false;
    for nla in NlasIterator::new(data).map_while(Result::ok) {
        let v = nla.value();
        match nla.kind() {
            IFLA_VLAN_ID => id = v.get(..2).map(|b| u16::from_ne_bytes([b[0], b[1]])),
            // The protocol is in network byte order, unlike the id.
            IFLA_VLAN_PROTOCOL => ad = v.get(..2) == Some(&ETH_P_8021AD.to_be_bytes()[..]),
            _ => {}
        }
    }
    Some(VlanInfo { id: id?, ad })
}

fn bridge_info(data: &[u8]) -> Option<BridgeInfo> {
    let mut vlan_filtering = None;
    let mut default_pvid = None;
    let mut ageing_time_cs = None;
    for nla in NlasIterator::new(data).map_while(Result::ok) {
        let v = nla.value();
        match nla.kind() {
            IFLA_BR_VLAN_FILTERING => vlan_filtering = parse_u8(v).ok().map(|b| b != 0),
            IFLA_BR_VLAN_DEFAULT_PVID => default_pvid = parse_u16(v).ok(),
            IFLA_BR_AGEING_TIME => ageing_time_cs = parse_u32(v).ok(),
            _ => {}
        }
    }
    // Every kernel with IFLA_INFO_DATA for bridges (4.0 on) sends vlan_filtering.
    Some(BridgeInfo {
        vlan_filtering: vlan_filtering?,
        default_pvid,
        ageing_time_cs,
    })
}

#[cfg(test)]
mod tests;

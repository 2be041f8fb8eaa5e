use std::net::IpAddr;
use std::path::Path;

use super::*;
use crate::config::parse_file;

fn parse(text: &str) -> Result<ClientsConfig, String> {
    parse_file(Path::new("rlbd.toml"), text)
        .map(|f| f.clients)
        .map_err(|e| e.to_string())
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

const MAC7: Mac = Mac(2, 0, 0, 0, 0, 7);

#[test]
fn addresses_prefixes_and_macs_parse_and_match() {
    let c = parse(
        "[clients]\nexclude = [\"10.0.0.1\", \"02:00:00:00:00:07\", \"fd00::/64\"]\n\
         pin = { \"10.0.0.7\" = \"eth1\", \"10.0.1.0/24\" = \"eth0\" }\n",
    )
    .unwrap();
    let r = ClientRules::new(&c);
    let other = Mac(2, 0, 0, 0, 0, 9);
    assert!(r.excluded(other, &[ip("10.0.0.1")]));
    assert!(
        r.excluded(MAC7, &[ip("10.9.9.9")]),
        "a MAC matches whatever address"
    );
    assert!(r.excluded(other, &[ip("10.0.0.2"), ip("fd00::5")]));
    assert_eq!(
        r.mark(other, &[ip("10.0.0.7")]),
        Some(ClientMark::Pinned("eth1".into()))
    );
    assert_eq!(
        r.mark(other, &[ip("10.0.1.77")]),
        Some(ClientMark::Pinned("eth0".into()))
    );
    assert_eq!(r.mark(other, &[ip("10.0.2.1")]), None);
    assert_eq!(r.mark(other, &[]), None);
}

#[test]
fn the_most_specific_pin_wins() {
    let c = parse("[clients.pin]\n\"10.0.0.0/16\" = \"eth0\"\n\"10.0.0.7\" = \"eth1\"\n").unwrap();
    let r = ClientRules::new(&c);
    let m = Mac(2, 0, 0, 0, 0, 9);
    assert_eq!(
        r.mark(m, &[ip("10.0.0.7")]),
        Some(ClientMark::Pinned("eth1".into()))
    );
    assert_eq!(
        r.mark(m, &[ip("10.0.3.7")]),
        Some(ClientMark::Pinned("eth0".into()))
    );
}

#[test]
fn a_bad_entry_is_named_with_file_line_and_key() {
    let e = parse("bond = \"bond0\"\n[clients]\nexclude = [\n  \"10.0.0.1\",\n  \"gateway\",\n]\n")
        .unwrap_err();
    assert!(
        e.starts_with("rlbd.toml:5: clients.exclude:") && e.contains("gateway"),
        "{e}"
    );
    let e =
        parse("[clients.pin]\n\"10.0.0.7\" = \"eth1\"\n\"10.0.0.300\" = \"eth1\"\n").unwrap_err();
    assert!(
        e.starts_with("rlbd.toml:3: clients.pin.\"10.0.0.300\":"),
        "{e}"
    );
    let e = parse("[clients]\npin = { \"10.0.0.8/24\" = \"eth1\" }\n").unwrap_err();
    assert!(
        e.starts_with("rlbd.toml:2: clients.pin.\"10.0.0.8/24\":") && e.contains("10.0.0.0/24"),
        "{e}"
    );
    let e = parse("[clients]\npin = { \"10.0.0.8\" = \"eth/1\" }\n").unwrap_err();
    assert!(e.contains("rlbd.toml:2") && e.contains("interface"), "{e}");
    let e = parse("[clients]\nexclude = [\"ff:ff:ff:ff:ff:ff\"]\n").unwrap_err();
    assert!(e.contains("unicast"), "{e}");
    let e = parse("[clients]\nsteer = true\n").unwrap_err();
    assert!(
        e.contains("rlbd.toml:2") && e.contains("clients.steer"),
        "{e}"
    );
}

#[test]
fn pinned_and_excluded_is_refused_naming_the_pin() {
    for (x, p) in [
        ("10.0.0.7", "10.0.0.7"),
        ("10.0.0.0/24", "10.0.0.7"),
        ("10.0.0.7", "10.0.0.0/24"),
        ("02:00:00:00:00:07", "02:00:00:00:00:07"),
    ] {
        let text = format!("[clients]\nexclude = [\"{x}\"]\n\n[clients.pin]\n\"{p}\" = \"eth1\"\n");
        let e = parse(&text).unwrap_err();
        let want = format!("rlbd.toml:5: clients.pin.\"{p}\": {p} is pinned and excluded");
        assert!(e.starts_with(&want), "{e}");
    }
    // Different clients: both stand.
    parse("[clients]\nexclude = [\"10.0.0.1\"]\npin = { \"10.0.0.7\" = \"eth1\" }\n").unwrap();
}

#[test]
fn a_pin_to_a_port_that_is_not_ours_is_named_at_run_time() {
    let c =
        parse("\n[clients]\npin = { \"10.0.0.7\" = \"eth1\", \"10.0.0.8\" = \"eth9\" }\n").unwrap();
    let ports = ["eth0".to_string(), "eth1".to_string()];
    let e = c.check_ports(&ports).unwrap_err().to_string();
    assert_eq!(
        e,
        "rlbd.toml:3: clients.pin.\"10.0.0.8\": eth9 is not a port of this daemon (its ports: eth0, eth1)"
    );
    let fine = parse("[clients]\npin = { \"10.0.0.7\" = \"eth1\" }\n").unwrap();
    fine.check_ports(&ports).unwrap();
}

#[test]
fn the_section_survives_check_config_rendering() {
    let f = parse_file(
        Path::new("rlbd.toml"),
        "[clients]\nexclude = [\"10.0.0.1\"]\npin = { \"10.0.0.7\" = \"eth1\" }\n",
    )
    .unwrap();
    let back: crate::config::FileConfig = toml::from_str(&toml::to_string(&f).unwrap()).unwrap();
    assert_eq!(back.clients.exclude, f.clients.exclude);
    assert_eq!(back.clients.pin, f.clients.pin);
}

//! The few per-interface values that only sysfs and procfs expose.

use std::fs;
use std::io;
use std::path::Path;

/// The link speed the driver reports in /sys/class/net/IF/speed, in Mb/s.
///
/// `None` when the interface does not exist, is down (the read fails with EINVAL), or the
/// driver does not know (-1, or the u32 SPEED_UNKNOWN that some kernels print unsigned).
/// Note that sysfs shows the network namespace it was mounted in, not the caller's.
pub fn link_speed_mbps(ifname: &str) -> Option<u64> {
    if !valid_component(ifname) {
        return None;
    }
    read_speed(&Path::new("/sys/class/net").join(ifname).join("speed"))
}

/// An integer from /proc/sys/net/ipv4/conf/IF/KEY (rp_filter, arp_ignore, arp_announce...).
/// `ifname` may also be "all" or "default". Unlike sysfs, these follow the caller's network
/// namespace.
pub fn read_ipv4_conf(ifname: &str, key: &str) -> io::Result<i64> {
    for (what, part) in [("interface name", ifname), ("sysctl key", key)] {
        if !valid_component(part) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("invalid {what} {part:?} for /proc/sys/net/ipv4/conf"),
            ));
        }
    }
    read_i64(&Path::new("/proc/sys/net/ipv4/conf").join(ifname).join(key))
}

/// Rejects anything that would make the path leave the intended directory.
fn valid_component(s: &str) -> bool {
    !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '\0'])
}

fn read_speed(path: &Path) -> Option<u64> {
    let speed = read_i64(path).ok()?;
    // SPEED_UNKNOWN is -1, printed by some drivers/kernels as 4294967295.
    (speed > 0 && speed != i64::from(u32::MAX)).then_some(speed as u64)
}

fn read_i64(path: &Path) -> io::Result<i64> {
    let text = fs::read_to_string(path)
        .map_err(|e| io::Error::new(e.kind(), format!("reading {}: {e}", path.display())))?;
    text.trim().parse::<i64>().map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: {:?} is not an integer: {e}",
                path.display(),
                text.trim()
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> Self {
            let dir = std::env::temp_dir().join(format!(
                "rlbd-netlink-{tag}-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }

        fn file(&self, name: &str, content: &str) -> PathBuf {
            let path = self.0.join(name);
            fs::write(&path, content).unwrap();
            path
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn speed_values() {
        let dir = TempDir::new("speed");
        assert_eq!(read_speed(&dir.file("a", "1000\n")), Some(1000));
        assert_eq!(read_speed(&dir.file("b", "25000")), Some(25000));
        assert_eq!(read_speed(&dir.file("c", "-1\n")), None);
        assert_eq!(read_speed(&dir.file("d", "4294967295\n")), None);
        assert_eq!(read_speed(&dir.file("e", "0\n")), None);
        assert_eq!(read_speed(&dir.file("f", "fast\n")), None);
        assert_eq!(read_speed(&dir.0.join("missing")), None);
    }

    #[test]
    fn integer_errors_name_the_file() {
        let dir = TempDir::new("int");
        assert_eq!(read_i64(&dir.file("ok", " 2\n")).unwrap(), 2);
        let err = read_i64(&dir.file("bad", "x\n")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("bad"), "{err}");
        let err = read_i64(&dir.0.join("nope")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(err.to_string().contains("nope"), "{err}");
    }

    #[test]
    fn path_components_are_checked() {
        assert!(link_speed_mbps("../../etc").is_none());
        assert!(link_speed_mbps("").is_none());
        for (ifname, key) in [
            ("..", "rp_filter"),
            ("eth0", "../x"),
            ("a/b", "rp_filter"),
            ("lo", ""),
        ] {
            let err = read_ipv4_conf(ifname, key).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{ifname} {key}");
        }
    }

    #[test]
    fn reads_real_sysctl() {
        // Present on any Linux with IPv4; the value itself is the host's business.
        match read_ipv4_conf("all", "rp_filter") {
            Ok(v) => assert!((0..=2).contains(&v)),
            Err(e) => crate::test_support::skip("reads_real_sysctl", &e.to_string()),
        }
        assert!(read_ipv4_conf("no-such-if0", "rp_filter").is_err());
        assert_eq!(link_speed_mbps("no-such-if0"), None);
    }
}

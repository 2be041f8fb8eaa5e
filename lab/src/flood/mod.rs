//! A spoofed-source frame flood for the flood test and the capture benchmark (`rlbd-lab flood`): a raw AF_PACKET socket sending pre-built Ethernet/IPv4/UDP frames in `sendmmsg`
//! batches, as fast as the interface takes them, from many made-up source MACs and addresses.
//!
//! Source `s` has its own MAC (`02:52:..`, distinct for every `s`) and an IPv4 address in
//! 198.18.1.0 - 198.19.255.255 (198.18.0.0/15 without the labs' 198.18.0.0/24, so nothing
//! answers them and no one ARPs for them), and always sends frames of `sizes[s % sizes.len()]`
//! bytes (without the FCS). Frame `i` comes from source `i % sources`. Only for use between
//! namespaces the caller made.

mod frames;
mod sys;

use std::io;
use std::mem;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rlbd::capture::Mac;

pub use frames::{header, source};
use sys::open_sender;
pub use sys::{pin_to_cpu, process_cpu_ns, thread_cpu_ns};

/// Ethernet + IPv4 + UDP headers.
pub const HEADER_LEN: usize = 14 + 20 + 8;
/// Smallest and largest frame sizes accepted (without the FCS).
pub const MIN_SIZE: usize = 60;
pub const MAX_SIZE: usize = 1514;
/// The UDP port the frames are addressed to (discard).
pub const DST_PORT: u16 = 9;

/// `rlbd-lab flood`: raw frames from many made-up sources, as fast as the interface takes them.
#[derive(Debug, clap::Args)]
pub struct FloodArgs {
    /// Interface to send on.
    #[arg(long)]
    pub iface: String,
    /// Destination MAC of every frame.
    #[arg(long, value_name = "MAC")]
    pub dst_mac: String,
    /// Destination IPv4 address of every frame.
    #[arg(long, value_name = "IP", default_value = "198.18.0.1")]
    pub dst_ip: std::net::Ipv4Addr,
    /// Frames to send.
    #[arg(long)]
    pub count: u64,
    /// Distinct source MACs (and addresses in 198.18.0.0/15).
    #[arg(long)]
    pub sources: u32,
    /// Frame sizes without FCS, used in turn by the sources (comma separated).
    #[arg(long, value_delimiter = ',', default_value = "64")]
    pub sizes: Vec<usize>,
    /// Scramble the source MACs and addresses with a random key.
    #[arg(long)]
    pub random: bool,
    /// Pin the sender to this CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
    /// Frames per sendmmsg call.
    #[arg(long, default_value_t = 256)]
    pub batch: usize,
}

/// What to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FloodConfig {
    /// Destination MAC of every frame.
    pub dst_mac: Mac,
    /// Destination IPv4 address of every frame.
    pub dst_ip: Ipv4Addr,
    /// Frames to send.
    pub count: u64,
    /// Distinct sources (MAC and IPv4 address), at least 1.
    pub sources: u32,
    /// Frame sizes in bytes without the FCS, each in MIN_SIZE..=MAX_SIZE; source `s` uses
    /// `sizes[s % sizes.len()]`.
    pub sizes: Vec<usize>,
    /// `None`: source `s` gets MAC 02:52 followed by `s` (big endian) and the `s`-th address;
    /// `Some(key)`: MACs and addresses scrambled by `key` (MACs stay distinct).
    pub seed: Option<u64>,
    /// Frames per `sendmmsg` call.
    pub batch: usize,
}

impl FloodConfig {
    fn validate(&self) -> io::Result<()> {
        let bad = |m: String| Err(io::Error::new(io::ErrorKind::InvalidInput, m));
        if self.sources == 0 {
            return bad("at least one source is needed".into());
        }
        if self.sizes.is_empty() {
            return bad("at least one frame size is needed".into());
        }
        if let Some(s) = self
            .sizes
            .iter()
            .find(|s| !(MIN_SIZE..=MAX_SIZE).contains(*s))
        {
            return bad(format!("frame size {s} is outside {MIN_SIZE}..={MAX_SIZE}"));
        }
        if self.batch == 0 || self.batch > 1024 {
            return bad(format!("batch {} is outside 1..=1024", self.batch));
        }
        Ok(())
    }
}

/// What was sent.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FloodReport {
    /// Frames the kernel accepted.
    pub sent: u64,
    /// Frames refused (ENOBUFS and the like) and skipped.
    pub failed: u64,
    /// Bytes of the accepted frames (without FCS).
    pub bytes: u64,
    /// Wall time of the sending loop.
    pub secs: f64,
    /// CPU time (user + system) of the sending thread during the loop, which on a veth includes
    /// the receive processing the kernel does in the sender's context.
    pub cpu_ns: u64,
}

impl FloodReport {
    /// One `key=value` line, as `rlbd-lab flood` prints it.
    pub fn to_line(&self) -> String {
        format!(
            "sent={} failed={} bytes={} secs={:.6} cpu_ns={}",
            self.sent, self.failed, self.bytes, self.secs, self.cpu_ns
        )
    }

    /// Parses [`FloodReport::to_line`]'s output (the last line that has `sent=`).
    pub fn from_output(text: &str) -> Option<FloodReport> {
        let line = text.lines().rev().find(|l| l.contains("sent="))?;
        let get = |k: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(k)?.strip_prefix('='))
        };
        Some(FloodReport {
            sent: get("sent")?.parse().ok()?,
            failed: get("failed")?.parse().ok()?,
            bytes: get("bytes")?.parse().ok()?,
            secs: get("secs")?.parse().ok()?,
            cpu_ns: get("cpu_ns")?.parse().ok()?,
        })
    }
}

/// Sends `cfg.count` frames out of `iface` as fast as it takes them, stopping early when `stop`
/// is set. Headers for every source are built before the clock starts.
pub fn flood(iface: &str, cfg: &FloodConfig, stop: &AtomicBool) -> io::Result<FloodReport> {
    cfg.validate()?;
    let fd = open_sender(iface)?;
    let sources = cfg.sources as usize;
    let headers: Vec<[u8; HEADER_LEN]> = (0..cfg.sources)
        .map(|s| {
            let (mac, ip) = source(s, cfg.seed);
            let size = cfg.sizes[s as usize % cfg.sizes.len()];
            header(mac, cfg.dst_mac, ip, cfg.dst_ip, size)
        })
        .collect();
    let padding = vec![0u8; MAX_SIZE - HEADER_LEN];
    let batch = cfg.batch;
    let empty = libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    };
    // Fixed-size arrays, never reallocated: the message headers point into `iovs`.
    let mut iovs: Vec<[libc::iovec; 2]> = vec![[empty, empty]; batch];
    // SAFETY: mmsghdr is plain data; all-zero is valid (no name, no control data).
    let mut msgs: Vec<libc::mmsghdr> = (0..batch).map(|_| unsafe { mem::zeroed() }).collect();
    for (m, iov) in msgs.iter_mut().zip(iovs.iter_mut()) {
        m.msg_hdr.msg_iov = iov.as_mut_ptr();
        m.msg_hdr.msg_iovlen = 2;
    }
    let mut sizes = vec![0usize; batch];
    let mut report = FloodReport::default();
    let mut next: u64 = 0;
    let cpu0 = thread_cpu_ns();
    let t0 = Instant::now();
    while next < cfg.count && !stop.load(Ordering::Relaxed) {
        let n = (cfg.count - next).min(batch as u64) as usize;
        for k in 0..n {
            let s = ((next + k as u64) % sources as u64) as usize;
            let size = cfg.sizes[s % cfg.sizes.len()];
            sizes[k] = size;
            iovs[k][0] = libc::iovec {
                iov_base: headers[s].as_ptr() as *mut libc::c_void,
                iov_len: HEADER_LEN,
            };
            iovs[k][1] = libc::iovec {
                iov_base: padding.as_ptr() as *mut libc::c_void,
                iov_len: size - HEADER_LEN,
            };
        }
        // SAFETY: the first `n` message headers point at `iovs[..n]`, whose buffers (`headers`,
        // `padding`) are live and at least as long as stated for the whole call; the kernel only
        // reads them and writes `msg_len`.
        let rc = unsafe { libc::sendmmsg(fd.as_raw_fd(), msgs.as_mut_ptr(), n as u32, 0) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::ENOBUFS) | Some(libc::EAGAIN) | Some(libc::EINTR) => {
                    if e.raw_os_error() != Some(libc::EINTR) {
                        // The first frame of the batch was refused: skip it.
                        report.failed += 1;
                        next += 1;
                    }
                    continue;
                }
                _ => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("sendmmsg on {iface}: {e}"),
                    ))
                }
            }
        }
        let done = rc as usize;
        report.sent += done as u64;
        report.bytes += sizes[..done].iter().map(|s| *s as u64).sum::<u64>();
        next += done as u64;
    }
    report.secs = t0.elapsed().as_secs_f64();
    report.cpu_ns = thread_cpu_ns().saturating_sub(cpu0);
    Ok(report)
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<Mac> {
    s.parse().ok()
}

/// `rlbd-lab flood`: sends, then prints the report line.
pub fn run(args: &FloodArgs) -> Result<FloodReport, String> {
    let dst_mac =
        parse_mac(&args.dst_mac).ok_or_else(|| format!("bad --dst-mac {:?}", args.dst_mac))?;
    if let Some(cpu) = args.cpu {
        pin_to_cpu(cpu).map_err(|e| e.to_string())?;
    }
    let seed = args.random.then(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        t.as_nanos() as u64 ^ u64::from(std::process::id()).rotate_left(32)
    });
    let cfg = FloodConfig {
        dst_mac,
        dst_ip: args.dst_ip,
        count: args.count,
        sources: args.sources,
        sizes: args.sizes.clone(),
        seed,
        batch: args.batch,
    };
    let stop = super::netns::stop_flag();
    flood(&args.iface, &cfg, &stop).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_line_round_trips() {
        let r = FloodReport {
            sent: 10,
            failed: 1,
            bytes: 640,
            secs: 0.5,
            cpu_ns: 12345,
        };
        assert_eq!(
            FloodReport::from_output(&format!("noise\n{}\n", r.to_line())),
            Some(r)
        );
        assert_eq!(
            parse_mac("02:52:4c:42:be:01"),
            Some(Mac(2, 0x52, 0x4c, 0x42, 0xbe, 1))
        );
        assert_eq!(parse_mac("02:52:4c:42:be"), None);
        assert_eq!(parse_mac("02:52:4c:42:be:01:00"), None);
    }

    #[test]
    fn bad_configs_are_refused() {
        let ok = FloodConfig {
            dst_mac: Mac(2, 0, 0, 0, 0, 1),
            dst_ip: Ipv4Addr::new(198, 18, 0, 1),
            count: 1,
            sources: 1,
            sizes: vec![64],
            seed: None,
            batch: 64,
        };
        assert!(ok.validate().is_ok());
        for bad in [
            FloodConfig {
                sources: 0,
                ..ok.clone()
            },
            FloodConfig {
                sizes: vec![],
                ..ok.clone()
            },
            FloodConfig {
                sizes: vec![59],
                ..ok.clone()
            },
            FloodConfig {
                sizes: vec![1515],
                ..ok.clone()
            },
            FloodConfig {
                batch: 0,
                ..ok.clone()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}

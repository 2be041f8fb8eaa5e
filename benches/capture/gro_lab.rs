//! The GRO benchmark's lab (`gro.rs`): the two namespaces and their veth with GRO in threaded
//! NAPI (torn down on drop), and the counters read around a run: tasks' run time, a CPU's busy
//! time, a process's eBPF programs' run statistics, a device's received packets; and
//! kernel.bpf_stats_enabled, set for a while.

use std::collections::HashMap;
use std::time::Duration;

use rlbd_lab::netns::run_cmd;

use super::{Res, RX_CPU, TX_CPU};

pub const SRV_IP: &str = "198.18.200.2";
const CLI_IP: &str = "198.18.200.1";
const BPF_STATS: &str = "/proc/sys/kernel/bpf_stats_enabled";

/// The two namespaces and the veth; deleted on drop (after killing what runs in them).
pub struct Lab {
    pub srv: String,
    pub cli: String,
    pub srv_if: String,
    pub cli_if: String,
    made: Vec<String>,
}

fn ethtool(ns: &str, dev: &str, args: &[&str]) -> Res<()> {
    let mut cmd = vec!["ip", "netns", "exec", ns, "ethtool", "-K", dev];
    cmd.extend_from_slice(args);
    run_cmd(&cmd).map(drop)
}

impl Lab {
    pub fn create() -> Res<Lab> {
        let pid = std::process::id();
        let mut lab = Lab {
            srv: format!("rlbd-bench-{pid}-gro-s"),
            cli: format!("rlbd-bench-{pid}-gro-c"),
            srv_if: format!("gs{pid}"),
            cli_if: format!("gc{pid}"),
            made: Vec::new(),
        };
        for ns in [lab.cli.clone(), lab.srv.clone()] {
            run_cmd(&["ip", "netns", "add", &ns])?;
            lab.made.push(ns.clone());
            run_cmd(&["ip", "-n", &ns, "link", "set", "lo", "up"])?;
        }
        let (srv, cli, srv_if, cli_if) = (&lab.srv, &lab.cli, &lab.srv_if, &lab.cli_if);
        run_cmd(&[
            "ip", "-n", cli, "link", "add", cli_if, "type", "veth", "peer", "name", srv_if,
            "netns", srv,
        ])?;
        for (ns, dev, ip) in [(cli, cli_if, CLI_IP), (srv, srv_if, SRV_IP)] {
            run_cmd(&[
                "ip",
                "-n",
                ns,
                "addr",
                "add",
                &format!("{ip}/24"),
                "dev",
                dev,
            ])?;
            run_cmd(&["ip", "-n", ns, "link", "set", dev, "up"])?;
        }
        // GRO on a veth runs it in NAPI; NAPI threads exist only once it does.
        ethtool(cli, cli_if, &["tso", "off", "gro", "on"])?;
        ethtool(srv, srv_if, &["gro", "on"])?;
        for (ns, dev) in [(cli, cli_if), (srv, srv_if)] {
            let script = format!("echo 1 > /sys/class/net/{dev}/threaded");
            run_cmd(&["ip", "netns", "exec", ns, "sh", "-c", &script])?;
        }
        Ok(lab)
    }

    pub fn set_mtu(&self, mtu: u32) -> Res<()> {
        for (ns, dev) in [(&self.cli, &self.cli_if), (&self.srv, &self.srv_if)] {
            run_cmd(&["ip", "-n", ns, "link", "set", dev, "mtu", &mtu.to_string()])?;
        }
        Ok(())
    }

    /// Pins both ends' NAPI threads (the server's to the receive CPU) and returns the server's.
    pub fn napi_threads(&self) -> Res<Vec<i32>> {
        let srv = napi_of(&self.srv_if);
        if srv.is_empty() {
            return Err(format!("no NAPI thread for {}", self.srv_if));
        }
        for (tids, cpu) in [(&srv, RX_CPU), (&napi_of(&self.cli_if), TX_CPU)] {
            for &tid in tids {
                pin_task(tid, cpu)?;
            }
        }
        Ok(srv)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in &self.made {
            if let Ok(out) = run_cmd(&["ip", "netns", "pids", ns]) {
                for pid in out.split_whitespace().filter_map(|p| p.parse::<i32>().ok()) {
                    // SAFETY: kill has no memory-safety preconditions; pid > 0 is one process,
                    // found inside our own namespace.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
        for ns in self.made.drain(..).rev() {
            if let Err(e) = run_cmd(&["ip", "netns", "del", &ns]) {
                eprintln!("GRO benchmark teardown: {e}");
            }
        }
    }
}

/// The kernel threads `napi/<dev>-<id>` (the name cut at 15 characters).
fn napi_of(dev: &str) -> Vec<i32> {
    let name = format!("napi/{dev}-");
    let prefix = &name[..name.len().min(15)];
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim_end().starts_with(prefix))
        })
        .collect()
}

fn pin_task(tid: i32, cpu: usize) -> Res<()> {
    // SAFETY: cpu_set_t is plain data, all-zero the empty set; CPU_SET writes inside it and
    // sched_setaffinity only reads it.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    match rc {
        0 => Ok(()),
        _ => Err(format!(
            "pinning thread {tid} to CPU {cpu}: {}",
            std::io::Error::last_os_error()
        )),
    }
}

/// Run time of a task (first field of /proc/<tid>/schedstat), in ns.
pub fn task_ns(tid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{tid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Run time of all a process's threads, in ns.
pub fn process_ns(pid: i32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .map(|tid: i32| task_ns(tid))
                .sum()
        })
        .unwrap_or(0)
}

/// Busy time of one CPU in /proc/stat (user, nice, system, irq, softirq), in ns.
pub fn cpu_busy_ns(cpu: usize) -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let name = format!("cpu{cpu}");
    let v: Vec<u64> = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name.as_str()))
        .map(|l| {
            l.split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let busy: u64 = [0, 1, 2, 5, 6].iter().filter_map(|&i| v.get(i)).sum();
    busy * 1_000_000_000 / hz
}

/// The eBPF programs a process holds: id -> (run time in ns, runs), from its fdinfo.
pub fn programs(pid: i32) -> HashMap<u64, (u64, u64)> {
    let mut out = HashMap::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return out;
    };
    for e in dir.filter_map(Result::ok) {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        let field = |k: &str| -> Option<u64> {
            text.lines()
                .find_map(|l| l.strip_prefix(k)?.strip_prefix(':'))
                .and_then(|v| v.trim().parse().ok())
        };
        if let (Some(id), Some(ns), Some(n)) =
            (field("prog_id"), field("run_time_ns"), field("run_cnt"))
        {
            out.insert(id, (ns, n));
        }
    }
    out
}

/// Received (bytes, packets) of `dev` as the process `pid`'s namespace sees them.
pub fn dev_rx(pid: i32, dev: &str) -> (u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/net/dev")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix(dev)?.strip_prefix(':'))
        .map(|rest| {
            let v: Vec<u64> = rest
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
            (
                v.first().copied().unwrap_or(0),
                v.get(1).copied().unwrap_or(0),
            )
        })
        .unwrap_or((0, 0))
}

/// The programs' run time and runs over the transfer: the first loaded (the lowest id: the
/// ingress program, loaded before the egress one), and the rest summed.
pub fn program_deltas(
    before: &HashMap<u64, (u64, u64)>,
    after: &HashMap<u64, (u64, u64)>,
) -> ((u64, u64), (u64, u64)) {
    let mut ids: Vec<&u64> = after.keys().collect();
    ids.sort();
    let delta = |id: &u64| {
        let (a, b) = (after[id], before.get(id).copied().unwrap_or((0, 0)));
        (a.0.saturating_sub(b.0), a.1.saturating_sub(b.1))
    };
    let mut ingress = (0, 0);
    let mut rest = (0, 0);
    for (i, id) in ids.into_iter().enumerate() {
        let d = delta(id);
        let into = if i == 0 { &mut ingress } else { &mut rest };
        *into = (into.0 + d.0, into.1 + d.1);
    }
    (ingress, rest)
}

/// kernel.bpf_stats_enabled set while this lives; the old value back on drop.
pub struct BpfStats(Option<String>);

impl BpfStats {
    pub fn set(on: bool) -> Res<BpfStats> {
        let old = std::fs::read_to_string(BPF_STATS).ok();
        let v = if on { "1" } else { "0" };
        std::fs::write(BPF_STATS, v).map_err(|e| format!("cannot set {BPF_STATS} to {v}: {e}"))?;
        Ok(BpfStats(old))
    }
}

impl Drop for BpfStats {
    fn drop(&mut self) {
        if let Some(old) = &self.0 {
            let _ = std::fs::write(BPF_STATS, old.trim());
        }
    }
}

//! The GRO benchmark's second measure of rlbd's programs (`gro.rs`): a CPU profile of the
//! receive side's tasks over the transfer (`perf record -t`), and the share of its samples taken
//! inside rlbd's programs (the helpers they call included).
//!
//! The kernel's run-time statistics time each program run with two clock reads, and on this
//! kind of VM an empty program already shows about 80 ns a run: a program's run time is an upper
//! bound of what it costs. A profile has no such floor: its samples inside the programs are their
//! own instructions only. What it leaves out is the hook's dispatch, inlined into the receive
//! core (`tcx_run` in `__netif_receive_skb_core`): a lower bound. Both are shown; the statistics
//! judge. Only with `RLBD_BENCH_GRO_PERF=1`, and `perf` (`RLBD_BENCH_PERF=0` skips it too).

use super::profile::Profile;
use super::Res;

/// rlbd's programs, as perf names JIT-compiled eBPF (`bpf_prog_<tag>_<name>`).
const RLBD_PROGS: &str = "^bpf_prog_[0-9a-f]+_rlbd_.*$";

/// Stops `profile` (of the receive side's tasks, `Profile::start_tasks`): the samples inside
/// rlbd's programs, and all the samples.
pub fn finish(profile: Profile) -> Res<(u64, u64)> {
    let (under, all) = parent_and_all(&profile.report(RLBD_PROGS)?);
    if all == 0 {
        return Err("perf took no samples of the receive side".into());
    }
    Ok((under, all))
}

/// From `perf report --sort parent,sym -p RE -n` rows (`percent samples parent [k] symbol`):
/// the samples under a parent matching RE, and all.
fn parent_and_all(report: &str) -> (u64, u64) {
    let (mut under, mut all) = (0, 0);
    for line in report.lines().filter(|l| !l.starts_with('#')) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let [pct, n, parent, ..] = words[..] else {
            continue;
        };
        let (true, Ok(n)) = (pct.ends_with('%'), n.parse::<u64>()) else {
            continue;
        };
        all += n;
        if parent != "[other]" {
            under += n;
        }
    }
    (under, all)
}

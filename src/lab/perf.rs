//! Reading `perf report` output (the capture benchmark's CPU profiles).

/// The samples under any of the parents asked for, in `perf report --sort parent -p <regex> -n`
/// output: every row but `[other]`, whose count is the second column. `None` when the output
/// has no row at all (an empty or unreadable profile).
pub fn parent_samples(report: &str) -> Option<u64> {
    let mut rows = 0;
    let mut under = 0;
    for line in report.lines().filter(|l| !l.starts_with('#')) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let [pct, n, name, ..] = words[..] else {
            continue;
        };
        let Ok(n) = n.parse::<u64>() else { continue };
        if !pct.ends_with('%') {
            continue;
        }
        rows += 1;
        if name != "[other]" {
            under += n;
        }
    }
    (rows > 0).then_some(under)
}

/// The samples taken in functions whose name starts with `prefix` (a compiler's `.constprop.0`
/// and the like follow it), in `perf report --sort sym -n` output. `None` when the output has
/// no row at all.
pub fn self_samples(report: &str, prefix: &str) -> Option<u64> {
    let mut rows = 0;
    let mut n = 0;
    for line in report.lines().filter(|l| !l.starts_with('#')) {
        let words: Vec<&str> = line.split_whitespace().collect();
        // `12.34%  5678  [k] name`
        let [pct, count, _, name, ..] = words[..] else {
            continue;
        };
        let Ok(count) = count.parse::<u64>() else {
            continue;
        };
        if !pct.ends_with('%') {
            continue;
        }
        rows += 1;
        if name.starts_with(prefix) {
            n += count;
        }
    }
    (rows > 0).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::{parent_samples, self_samples};

    #[test]
    fn counts_the_functions_of_a_name_whatever_their_suffix() {
        let report = "# Samples: 117K of event 'cpu-clock'\n\
                      \x20    2.10%          2464  [k] __netif_receive_skb_core.constprop.0\n\
                      \x20    0.40%           470  [k] __netif_receive_skb_one_core\n\
                      \x20    1.46%          1713  [k] bpf_prog_63b55ff5ff31c29d_rlbd_rx0\n";
        assert_eq!(self_samples(report, "__netif_receive_skb_core"), Some(2464));
        assert_eq!(self_samples(report, "tc_run"), Some(0));
        assert_eq!(self_samples("", "tc_run"), None);
    }

    #[test]
    fn counts_every_row_under_a_hook_and_nothing_else() {
        let report = "# Samples: 297K of event 'cpu-clock'\n\
                      #\n\
                      \x20   99.36%        295500  [other]\n\
                      \x20    0.60%          1790  tc_run\n\
                      \x20    0.04%           120  tpacket_rcv\n";
        assert_eq!(parent_samples(report), Some(1910));
        assert_eq!(parent_samples("# nothing\n"), None);
        assert_eq!(
            parent_samples("    100.00%   5000  [other]\n"),
            Some(0),
            "no hook ran: none of the samples"
        );
    }
}

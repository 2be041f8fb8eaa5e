//! Reading `perf report` output (the capture benchmark's CPU profiles).

/// From `perf report --no-children --sort parent,sym -p <regex> -n` output (rows of
/// `percent samples parent [k] symbol`): the samples under any of the parents asked for (every
/// row whose parent is not `[other]`), and the samples taken in functions outside them whose
/// name starts with `prefix` (a compiler's `.constprop.0` and the like follow it). `None` when
/// the output has no row at all (an empty or unreadable profile).
pub fn hook_and_self_samples(report: &str, prefix: &str) -> Option<(u64, u64)> {
    let mut rows = 0;
    let (mut under, mut own) = (0, 0);
    for line in report.lines().filter(|l| !l.starts_with('#')) {
        let words: Vec<&str> = line.split_whitespace().collect();
        let [pct, n, parent, _, sym, ..] = words[..] else {
            continue;
        };
        let Ok(n) = n.parse::<u64>() else { continue };
        if !pct.ends_with('%') {
            continue;
        }
        rows += 1;
        if parent != "[other]" {
            under += n;
        } else if sym.starts_with(prefix) {
            own += n;
        }
    }
    (rows > 0).then_some((under, own))
}

#[cfg(test)]
mod tests {
    use super::hook_and_self_samples;

    #[test]
    fn counts_the_hooks_and_the_prefixed_functions_outside_them() {
        let report = "# Samples: 117K of event 'cpu-clock'\n\
                      #\n\
                      \x20   2.09%   2455  [other]  [k] packet_sendmsg\n\
                      \x20   1.46%   1713  bpf_prog_63b5_rlbd_rx0  [k] bpf_prog_63b5_rlbd_rx0\n\
                      \x20   0.60%    700  tc_run  [k] cls_bpf_classify\n\
                      \x20   1.15%   1355  [other]  [k] __netif_receive_skb_core.constprop.0\n\
                      \x20   0.40%    470  [other]  [k] __netif_receive_skb_one_core\n";
        assert_eq!(
            hook_and_self_samples(report, "__netif_receive_skb_core"),
            Some((2413, 1355))
        );
        assert_eq!(
            hook_and_self_samples("    100.00%  5000  [other]  [k] x\n", "y"),
            Some((0, 0)),
            "no hook ran and no such function: none of the samples"
        );
        assert_eq!(hook_and_self_samples("# nothing\n", "x"), None);
    }
}

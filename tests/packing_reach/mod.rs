//! For the packing study (`RLBD_STUDY_REACH`): whether any set of a few moves that the
//! anti-flapping rules allow would leave every slave under what it delivers, knowing every
//! client's demand. It tells a run that rlbd could still mend within the hold-down from one
//! that has to wait it out (issue 27).
//!
//! The rules, as the planner keeps them: within its hold-down a client moves at most twice and
//! never back to the slave it left.

/// One move a mending set makes: (client, from, to).
pub type Step = (usize, usize, usize);

/// The smallest set of at most `most` moves, allowed at second `at`, after which no slave
/// carries more than it delivers (`caps`); `None` when there is none. `ticks` holds each
/// second's placement: the moves are read from where it changes.
pub fn mend(
    caps: &[f64],
    demands: &[f64],
    ticks: &[(u64, Vec<usize>)],
    at: u64,
    hold: u64,
    most: usize,
) -> Option<Vec<Step>> {
    let now = &ticks.iter().find(|t| t.0 == at)?.1;
    // Each client's moves within its hold-down at `at`: (second, the slave it left).
    let mut recent: Vec<Vec<(u64, usize)>> = vec![Vec::new(); demands.len()];
    for w in ticks.windows(2).filter(|w| w[1].0 <= at) {
        for (c, (&before, &after)) in w[0].1.iter().zip(&w[1].1).enumerate() {
            if before != after && at - w[0].0 < hold {
                recent[c].push((w[0].0, before));
            }
        }
    }
    let may = |c: usize, to: usize| match recent[c].as_slice() {
        [] => true,
        [(_, left)] => *left != to,
        _ => false,
    };
    let mut load = vec![0.0; caps.len()];
    for (c, &p) in now.iter().enumerate() {
        load[p] += demands[c];
    }
    let mut steps = Vec::new();
    (0..=most).find_map(|k| {
        search(caps, demands, now, &may, (0, k), &mut load, &mut steps).then(|| steps.clone())
    })
}

/// Depth-first: `k` more moves of clients from `first` on, onto `load`; true (with `steps`
/// holding them) when one leaves every slave under its capacity.
fn search(
    caps: &[f64],
    demands: &[f64],
    now: &[usize],
    may: &dyn Fn(usize, usize) -> bool,
    (first, k): (usize, usize),
    load: &mut [f64],
    steps: &mut Vec<Step>,
) -> bool {
    if k == 0 {
        return load.iter().zip(caps).all(|(l, c)| *l <= c + 1e-9);
    }
    for c in first..now.len() {
        let from = now[c];
        for to in (0..caps.len()).filter(|&to| to != from && may(c, to)) {
            load[from] -= demands[c];
            load[to] += demands[c];
            steps.push((c, from, to));
            if search(caps, demands, now, may, (c + 1, k - 1), load, steps) {
                return true;
            }
            steps.pop();
            load[from] += demands[c];
            load[to] -= demands[c];
        }
    }
    false
}

#[test]
fn a_move_back_to_the_slave_it_left_does_not_mend_within_its_hold_down() {
    // Client 1 came to slave 1 off slave 0 at second 2; slave 1 carries 12 of 10. Its way
    // back would mend it alone; within the hold-down two others' moves must.
    let ticks = vec![(2, vec![0, 0, 1]), (3, vec![0, 1, 1])];
    let (caps, demands) = ([10.0, 10.0, 3.0], [5.0, 4.0, 8.0]);
    assert_eq!(mend(&caps, &demands, &ticks, 3, 30, 1), None);
    assert_eq!(
        mend(&caps, &demands, &ticks, 3, 30, 2),
        Some(vec![(0, 0, 1), (2, 1, 0)])
    );
    assert_eq!(
        mend(&caps, &demands, &ticks, 3, 1, 1),
        Some(vec![(1, 1, 0)])
    );
}

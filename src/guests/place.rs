//! Where a guest goes when its rate is not known: a new guest, or one whose port failed.

use crate::policy::model::PortIndex;
use crate::policy::PortView;

/// The live port with the fewest guests (`per_port`), then the least utilized, then the lowest
/// index: new guests weigh nothing yet, so by load alone they would all land on one port.
pub fn least_loaded(ports: &[PortView], per_port: &[usize]) -> Option<PortIndex> {
    ports
        .iter()
        .enumerate()
        .filter(|(_, v)| v.up && v.capacity_bps > 0.0)
        .min_by(|(a, va), (b, vb)| {
            let (na, nb) = (per_port.get(*a).copied(), per_port.get(*b).copied());
            na.cmp(&nb)
                .then(va.utilization().total_cmp(&vb.utilization()))
                .then(a.cmp(b))
        })
        .map(|(i, _)| i)
}

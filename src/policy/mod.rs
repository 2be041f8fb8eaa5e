//! The rules: every decision of rlbd's, as pure code on plain data (no sockets, no clock, no
//! `unsafe`; the same input gives the same output). The engine (`src/engine/`) hands them the
//! facts and carries out what they decide, through the steering core (`src/steer/core/`: the
//! records each rule reads, and the frames) and the guests' table (`src/guests/`).
//!
//! | rule | file | decides |
//! |---|---|---|
//! | threshold and hits | `detector.rs` | a port is overloaded: K of the last W samples over the threshold |
//! | saturation | `ceiling.rs` | where a full port reads, learned: what counts as saturated, how full a target may get |
//! | failover | `planner/` (`failover`) | the clients of a port that is down go to live ports, now |
//! | overload walk | `planner/` (`overload`) | whom to move off an overloaded port, and where; the largest flow stays, or one this planner may not move |
//! | clean second | `planner/` (`SETTLE_SECS`) | no move on figures a move of the last seconds still blurs |
//! | room | `packing.rs` | gather room in one piece for a saturated port's client |
//! | exchange | `exchange.rs` | trade two clients when nothing fits whole |
//! | settle | `settle/` | correct a move that overfilled its target, once, never back |
//! | hold-down | `hold_down.rs` | a moved client (or guest) stays put for `hold_down` seconds |
//! | limits | `limits.rs` | updates within the per-client and total budgets |
//! | re-assertion | `reassert.rs` | which moved clients a frame on the wire puts at risk |
//! | confirm before send | `crate::host::HostView::can_claim`, `claims_for` | a frame only to a client the kernel's neighbour table confirms, at that address |
//! | drop veto, whole second | `crate::engine::counting` (`Counting::second`), `crate::engine::second` | no move on a second whose client rates the rings left incomplete |
//!
//! **Adding a rule**: its decision as a pure function or type here (a file of its own, named for
//! the rule), its inputs as facts the engine already has (or a new `Input` the shell reports),
//! its outcome applied by the engine or the steering core; a `Rule` switch
//! (`steer::core::types`) and a named invariant in the simulation (`tests/sim/checks.rs`) that
//! catches it switched off. docs/design.md, "Where each decision lives", has the longer map.
#![forbid(unsafe_code)]

pub mod ceiling;
pub mod config;
pub mod detector;
mod exchange;
pub mod hold_down;
pub mod limits;
pub mod model;
mod packing;
pub mod planner;
pub mod reassert;
mod settle;

pub use ceiling::Ceiling;
pub use config::{ConfigError, PolicyConfig};
pub use detector::Detector;
pub use hold_down::HoldDown;
pub use limits::Limiter;
pub use model::{sampling_resolution_bps, ClientView, Move, PortView, Reason, MIN_KEPT};
pub use planner::{place, place_new, plan, SETTLE_SECS};

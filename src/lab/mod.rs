//! Test labs: network namespaces with real Linux clients, and the traffic they send.

pub mod chart;
pub mod demo;
mod devsample;
pub mod flood;
pub mod labchart;
pub mod netns;
pub mod packing;
pub mod perf;
pub mod sample;
pub mod scenario;
pub mod traffic;

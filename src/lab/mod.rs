//! Test labs: network namespaces with real Linux clients, and the traffic they send.

pub mod traffic;

//! policy (in progress)

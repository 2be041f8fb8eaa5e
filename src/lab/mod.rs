//! lab (in progress)

//! steer (in progress)

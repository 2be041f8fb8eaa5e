//! capture (in progress)

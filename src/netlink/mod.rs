//! netlink (in progress)

//! Process exit codes (sysexits.h), one place for every command. systemd's unit keys on them:
//! `RestartPreventExitStatus=78` keeps a configuration error from becoming a restart loop.

/// The input data (a scenario file) is at fault.
pub const EX_DATAERR: u8 = 65;
/// Something needed is missing (the bond, an interface, a daemon to ask); it may appear later.
pub const EX_UNAVAILABLE: u8 = 69;
/// An operating-system error (a socket, a permission).
pub const EX_OSERR: u8 = 71;
/// A configuration error: fix the file or the command line; restarting will not help.
pub const EX_CONFIG: u8 = 78;

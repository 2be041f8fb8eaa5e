//! Process exit codes (sysexits.h), one place for every command. systemd's unit keys on them:
//! `RestartPreventExitStatus=64 78` keeps a command-line or configuration error from becoming a
//! restart loop.

/// The command line is wrong (an unknown option, a missing or malformed argument).
pub const EX_USAGE: u8 = 64;
/// The input data (a scenario file) is at fault.
pub const EX_DATAERR: u8 = 65;
/// Something needed is missing (the bond, an interface, a daemon to ask); it may appear later.
pub const EX_UNAVAILABLE: u8 = 69;
/// An operating-system error (a socket, a permission).
pub const EX_OSERR: u8 = 71;
/// A configuration error: fix the file or the command line; restarting will not help.
pub const EX_CONFIG: u8 = 78;

/// A failure that ends a command, with the exit code it maps to: the daemon's fatal errors and
/// the client commands' alike.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }
    pub fn config(message: impl Into<String>) -> Self {
        Self::new(EX_CONFIG, message)
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(EX_UNAVAILABLE, message)
    }
    /// An operating-system error, with what was being done.
    pub fn io(what: &str, e: std::io::Error) -> Self {
        Self::new(EX_OSERR, format!("{what}: {e}"))
    }
    /// Anything else (exit 1).
    pub fn other(message: impl Into<String>) -> Self {
        Self::new(1, message)
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

impl From<crate::config::ConfigError> for Failure {
    fn from(e: crate::config::ConfigError) -> Self {
        Failure::config(e.to_string())
    }
}

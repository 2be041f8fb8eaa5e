//! Feeds arbitrary bytes, as one control-socket request line, to `protocol::Request::parse`
//! (what the daemon runs on every line a local client sends): never a panic, an error quotes at
//! most a short prefix, and whatever parses prints back as a line that parses the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rlbd::protocol::{Request, MAX_REQUEST};

fuzz_target!(|data: &[u8]| {
    // The daemon hands the parser at most MAX_REQUEST bytes; longer input must still not panic.
    match Request::parse(data) {
        Ok(r) => {
            let line = r.line();
            assert!(line.ends_with('\n'));
            assert_eq!(Request::parse(line.trim_end().as_bytes()), Ok(r));
        }
        Err(e) => {
            assert!(!e.is_empty());
            // 40 quoted characters, escaped (up to 10 bytes each), plus the message.
            assert!(e.len() < 600, "error of {} bytes", e.len());
        }
    }
    if data.len() > MAX_REQUEST {
        let _ = Request::parse(&data[..MAX_REQUEST]);
    }
});

//! Feeds arbitrary text to the configuration loader (`config::parse_file`, what `rlbd run`,
//! `check-config` and SIGHUP use): never a panic, every error names a place, and every file it
//! accepts serializes back to TOML that it accepts again, unchanged.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use rlbd::config::parse_file;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("/etc/rlbd/fuzz.toml");
    match parse_file(path, text) {
        Ok(file) => {
            let again = toml::to_string(&file).expect("a valid configuration serializes");
            let back = parse_file(path, &again).expect("its serialization loads again");
            assert_eq!(back, file, "round trip through\n{again}");
        }
        Err(e) => {
            let shown = e.to_string();
            assert!(!shown.is_empty());
        }
    }
});

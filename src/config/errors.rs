//! Configuration errors in plain words: every one names the file, the line and the key at
//! fault. The TOML parser's own messages are serde's ("invalid type: string \"high\", expected
//! f64") and name no key; they are reworded here and given the key found at their span.

use std::path::Path;

use super::ConfigError;

/// `offset`, or the char boundary just before it: offsets here come from the parser's spans
/// and line arithmetic, and the file's bytes are anyone's (never slice inside a character).
fn boundary(text: &str, offset: usize) -> usize {
    let mut o = offset.min(text.len());
    while !text.is_char_boundary(o) {
        o -= 1;
    }
    o
}

/// The `[section]` (None: the top level) that holds the line starting at byte `offset`.
fn section_at(text: &str, offset: usize) -> Option<String> {
    text[..boundary(text, offset)]
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map(|l| unquote(l.trim_start_matches('[').trim_end_matches(']')).to_string())
}

fn unquote(s: &str) -> &str {
    s.trim().trim_matches('"').trim_matches('\'')
}

/// Line (1-based) where `key` is assigned in `[section]` (None: the top level), quoted or not;
/// failing that, anywhere as `section.key` (a dotted key).
pub(super) fn line_of(text: &str, section: Option<&str>, key: &str) -> Option<usize> {
    let mut offset = 0;
    let mut first_dotted = None;
    let dotted = section.map(|s| format!("{s}.{key}"));
    for (i, line) in text.lines().enumerate() {
        let here = offset;
        offset += line.len() + 1;
        let Some((lhs, _)) = line.split_once('=') else {
            continue;
        };
        let lhs = unquote(lhs);
        if lhs == key && section_at(text, here).as_deref() == section {
            return Some(i + 1);
        }
        if first_dotted.is_none() && dotted.as_deref() == Some(lhs) {
            first_dotted = Some(i + 1);
        }
    }
    first_dotted
}

/// The full key (`policy.threshold`) assigned on the line holding byte `offset`, if that line
/// assigns one; the section's name on a `[section]` line.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let offset = boundary(text, offset);
    let start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line = text[start..].lines().next().unwrap_or("").trim();
    if line.starts_with('[') {
        return section_at(text, start + line.len());
    }
    let (lhs, _) = line.split_once('=')?;
    let key = unquote(lhs);
    if key.is_empty() {
        return None;
    }
    Some(match section_at(text, start) {
        Some(s) => format!("{s}.{key}"),
        None => key.to_string(),
    })
}

/// serde's name of an expected type, in plain words.
fn expected(what: &str) -> String {
    let what = what.trim();
    match what {
        "f64" | "f32" => "a number".into(),
        "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number, 0 or more".into(),
        "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number".into(),
        "a boolean" => "true or false".into(),
        "a sequence" => "a list, e.g. [\"eth0\", \"eth1\"]".into(),
        w if w.starts_with("struct ") || w == "a map" => "a table ([section])".into(),
        w => w.into(),
    }
}

/// serde's name of a value found, in plain words.
fn found(what: &str) -> String {
    let what = what.trim().replace('`', "");
    for (serde, plain) in [
        ("string ", "the string "),
        ("integer ", "the whole number "),
        ("floating point ", "the number "),
        ("boolean ", ""),
    ] {
        if let Some(v) = what.strip_prefix(serde) {
            return format!("{plain}{v}");
        }
    }
    match what.as_str() {
        "sequence" => "a list".into(),
        "map" => "a table".into(),
        w => w.into(),
    }
}

/// The parser's message in plain words.
pub(super) fn plain(msg: &str) -> String {
    let msg = msg.trim();
    for (prefix, out_of_range) in [("invalid type: ", false), ("invalid value: ", true)] {
        if let Some((f, e)) = msg
            .strip_prefix(prefix)
            .and_then(|rest| rest.split_once(", expected "))
        {
            let (f, e) = (found(f), expected(e));
            return if out_of_range {
                format!("{f} is out of range: expected {e}")
            } else {
                format!("expected {e}, found {f}")
            };
        }
    }
    if let Some(rest) = msg.strip_prefix("unknown field ") {
        let (name, known) = rest.split_once(", expected ").unwrap_or((rest, ""));
        let name = name.trim().trim_matches('`');
        let known = known
            .trim_start_matches("one of ")
            .replace('`', "")
            .replace(" or ", ", ");
        return if known.is_empty() {
            format!("unknown key {name:?}")
        } else {
            format!("unknown key {name:?}; the keys here are {known}")
        };
    }
    msg.replace('`', "")
}

/// A TOML parser error on `text` as a [`ConfigError`] with place, key and plain message.
pub(super) fn from_toml(path: &Path, text: &str, e: &toml::de::Error) -> ConfigError {
    let start = e.span().map(|s| boundary(text, s.start));
    let place = match start {
        Some(s) => format!("{}:{}", path.display(), text[..s].matches('\n').count() + 1),
        None => path.display().to_string(),
    };
    let mut msg = plain(e.message());
    let key = start.and_then(|s| key_at(text, s)).unwrap_or_default();
    // The parser names the unknown key in its message; the key field already does.
    if let Some(rest) = msg.strip_prefix("unknown key ") {
        msg = match rest.split_once("; ") {
            Some((_, known)) => format!("not a known key; {known}"),
            None => "not a known key".into(),
        };
    }
    ConfigError {
        place: Some(place),
        key,
        message: msg,
    }
}

#[cfg(test)]
mod boundary_tests {
    /// Found by the fuzzer: a multi-byte character where a span or a trimmed line ends.
    #[test]
    fn a_multibyte_character_at_an_offset_is_never_sliced() {
        let text = "\t[AW\u{10}[App*w\u{448}";
        for o in 0..=text.len() + 2 {
            let _ = super::section_at(text, o);
            let _ = super::key_at(text, o);
        }
        let bytes = [9, 91, 65, 87, 16, 91, 65, 112, 112, 42, 119, 209, 136];
        let text = std::str::from_utf8(&bytes).unwrap();
        let _ = crate::config::parse_file(std::path::Path::new("fuzz.toml"), text);
    }
}

//! Pure helpers of the command-line tool: durations, ages, owner data, JSON strings.

use std::fmt::Write as _;
use std::time::Duration;

/// A duration from the command line, remembered as it was typed so that messages can quote
/// it exactly (`-w 1500ms` is reported as "1500ms", not rounded to "1s").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dur {
    pub value: Duration,
    text: String,
}

impl Dur {
    /// A duration zklock worked out itself (a default), shown with millisecond precision.
    pub fn computed(value: Duration) -> Dur {
        let millis = Duration::from_millis(u64::try_from(value.as_millis()).unwrap_or(u64::MAX));
        Dur {
            value,
            text: humantime::format_duration(millis).to_string(),
        }
    }
}

impl std::fmt::Display for Dur {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Parses a duration in humantime's syntax (`500ms`, `10s`, `90sec`, `5min`, `1h30m`, `2d`,
/// `1.5s`); a bare number means seconds, as in flock(1)'s `--timeout`.
pub fn parse_duration(text: &str) -> Result<Dur, String> {
    let trimmed = text.trim();
    let bare = !trimmed.is_empty() && trimmed.chars().all(|c| c.is_ascii_digit() || c == '.');
    let value = if bare {
        let secs: f64 = trimmed
            .parse()
            .map_err(|_| format!("{trimmed:?} is not a number of seconds"))?;
        Duration::try_from_secs_f64(secs)
            .map_err(|_| format!("duration {trimmed:?} is too long"))?
    } else {
        humantime::parse_duration(trimmed).map_err(|e| {
            format!("{trimmed:?} is not a duration ({e}; examples: 500ms, 10s, 5min, 1h30m)")
        })?
    };
    Ok(Dur {
        value,
        text: trimmed.to_owned(),
    })
}

/// A compact human duration: `850ms`, `42s`, `3m07s`, `5h02m`, `2d03h`.
pub fn format_duration(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0 => format!("{}ms", d.subsec_millis()),
        1..=59 => format!("{secs}s"),
        60..=3599 => format!("{}m{:02}s", secs / 60, secs % 60),
        3600..=86_399 => format!("{}h{:02}m", secs / 3600, secs % 3600 / 60),
        _ => format!("{}d{:02}h", secs / 86_400, secs % 86_400 / 3600),
    }
}

/// `s` fit for one line of a table or message: control characters (a newline in owner data)
/// escaped as in Rust and JSON (`\\n`, `\\t`, `\\u{1b}`), everything else as it is.
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() || c == '\u{2028}' || c == '\u{2029}' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `s` as a JSON string literal, quotes included.
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A session id as ZooKeeper's logs and four-letter commands print it.
pub fn session_hex(id: i64) -> String {
    format!("{id:#x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_durations() {
        let ms = Duration::from_millis;
        let parsed = |text| parse_duration(text).map(|d| d.value);
        assert_eq!(parsed("500ms"), Ok(ms(500)));
        assert_eq!(parsed("10s"), Ok(ms(10_000)));
        assert_eq!(parsed("2m"), Ok(ms(120_000)));
        assert_eq!(parsed("1h"), Ok(ms(3_600_000)));
        assert_eq!(parsed("1h30m"), Ok(ms(5_400_000)));
        assert_eq!(parsed("1h 30m"), Ok(ms(5_400_000)));
        assert_eq!(parsed("90sec"), Ok(ms(90_000)));
        assert_eq!(parsed("5min"), Ok(ms(300_000)));
        assert_eq!(parsed("1.5s"), Ok(ms(1500)));
        assert_eq!(parsed("3"), Ok(ms(3000)));
        assert_eq!(parsed("2.5"), Ok(ms(2500)));
        assert_eq!(parsed("0s"), Ok(ms(0)));
        assert_eq!(parsed("0"), Ok(ms(0)));
        for bad in [
            "",
            "s",
            "10x",
            "ten seconds",
            "-1s",
            "1..2s",
            "1e3s",
            "1..2",
            ".",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn durations_are_shown_as_given() {
        assert_eq!(parse_duration("1500ms").unwrap().to_string(), "1500ms");
        assert_eq!(parse_duration(" 1h30m ").unwrap().to_string(), "1h30m");
        assert_eq!(parse_duration("7").unwrap().to_string(), "7");
        assert_eq!(
            Dur::computed(Duration::from_millis(1500)).to_string(),
            "1s 500ms"
        );
        assert_eq!(Dur::computed(Duration::from_secs(2)).to_string(), "2s");
        assert_eq!(
            Dur::computed(Duration::from_nanos(1_500_000_001)).to_string(),
            "1s 500ms"
        );
    }

    #[test]
    fn formats_ages() {
        let s = Duration::from_secs;
        assert_eq!(format_duration(Duration::from_millis(850)), "850ms");
        assert_eq!(format_duration(s(42)), "42s");
        assert_eq!(format_duration(s(187)), "3m07s");
        assert_eq!(format_duration(s(5 * 3600 + 120)), "5h02m");
        assert_eq!(format_duration(s(2 * 86_400 + 3 * 3600)), "2d03h");
    }

    #[test]
    fn printable_keeps_a_value_on_one_line() {
        assert_eq!(
            printable("host=a pid=1 thread=main"),
            "host=a pid=1 thread=main"
        );
        assert_eq!(printable("evil\nPOS  ROLE\r\t"), "evil\\nPOS  ROLE\\r\\t");
        assert_eq!(printable("\u{1b}[31mred"), "\\u{1b}[31mred");
        assert_eq!(printable("锁 ok"), "锁 ok");
    }

    #[test]
    fn escapes_json_strings() {
        assert_eq!(json_string("plain"), "\"plain\"");
        assert_eq!(
            json_string("a\"b\\c\nd\u{1}e\u{2028}"),
            "\"a\\\"b\\\\c\\nd\\u0001e\\u2028\""
        );
        assert_eq!(json_string("锁"), "\"锁\"");
    }

    #[test]
    fn session_ids_in_hex() {
        assert_eq!(session_hex(0x1000_0abc_0000_0001), "0x10000abc00000001");
    }
}

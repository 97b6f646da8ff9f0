//! `host_context.captured_at`: the source of truth types it as a datetime, so
//! it must read as an ISO 8601 date or date-time. The string is kept and shown
//! to the model exactly as sent; this only checks its shape and ranges.
//!
//! Accepted: `YYYY-MM-DD`, or that plus `T`/`t`/space and `HH:MM[:SS[.fff…]]`
//! with an optional `Z`/`z` or `±HH[:]MM` offset. Unix-time numbers, which
//! the Python original would also take, are not: the field is a string here.

/// Whether `text` is an ISO 8601 date or date-time of the accepted forms.
pub(crate) fn is_iso_8601(text: &str) -> bool {
    let bytes = text.as_bytes();
    let Some(rest) = date(bytes) else {
        return false;
    };
    let rest = match rest {
        [] => return true,
        [b'T' | b't' | b' ', rest @ ..] => rest,
        _ => return false,
    };
    let Some(rest) = time(rest) else {
        return false;
    };
    matches!(offset(rest), Some([]))
}

/// `YYYY-MM-DD` with a real month and day; the bytes after it.
fn date(bytes: &[u8]) -> Option<&[u8]> {
    let (year, rest) = digits(bytes, 4)?;
    let rest = rest.strip_prefix(b"-")?;
    let (month, rest) = digits(rest, 2)?;
    let rest = rest.strip_prefix(b"-")?;
    let (day, rest) = digits(rest, 2)?;
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    (1..=days).contains(&day).then_some(rest)
}

/// `HH:MM[:SS[.fraction]]`; the bytes after it.
fn time(bytes: &[u8]) -> Option<&[u8]> {
    let (hour, rest) = digits(bytes, 2)?;
    let rest = rest.strip_prefix(b":")?;
    let (minute, mut rest) = digits(rest, 2)?;
    if hour > 23 || minute > 59 {
        return None;
    }
    if let Some(after) = rest.strip_prefix(b":") {
        let (second, after) = digits(after, 2)?;
        if second > 59 {
            return None;
        }
        rest = after;
        if let Some(fraction) = rest.strip_prefix(b".").or_else(|| rest.strip_prefix(b",")) {
            let n_digits = fraction.iter().take_while(|b| b.is_ascii_digit()).count();
            if n_digits == 0 {
                return None;
            }
            rest = &fraction[n_digits..];
        }
    }
    Some(rest)
}

/// Nothing, `Z`, or `±HH[:]MM`; the bytes after it.
fn offset(bytes: &[u8]) -> Option<&[u8]> {
    match bytes {
        [] => Some(bytes),
        [b'Z' | b'z', rest @ ..] => Some(rest),
        [b'+' | b'-', rest @ ..] => {
            let (hours, rest) = digits(rest, 2)?;
            let rest = rest.strip_prefix(b":").unwrap_or(rest);
            let (minutes, rest) = digits(rest, 2)?;
            (hours <= 23 && minutes <= 59).then_some(rest)
        }
        _ => None,
    }
}

/// Exactly `n` ASCII digits as a number, and the bytes after them.
fn digits(bytes: &[u8], n: usize) -> Option<(u32, &[u8])> {
    if bytes.len() < n || !bytes[..n].iter().all(u8::is_ascii_digit) {
        return None;
    }
    let value = bytes[..n]
        .iter()
        .fold(0u32, |value, digit| value * 10 + u32::from(digit - b'0'));
    Some((value, &bytes[n..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_date_times_of_iso_8601_are_accepted() {
        for text in [
            "2026-09-05T10:00:00Z",
            "2026-09-05T10:00:00.123456+02:00",
            "2026-09-05 10:00",
            "2026-09-05t10:00:00-0530",
            "2024-02-29",
            "2026-09-05T10:00:00,5z",
        ] {
            assert!(is_iso_8601(text), "{text}");
        }
    }

    #[test]
    fn anything_else_is_rejected() {
        for text in [
            "",
            "now",
            "yesterday",
            "1700000000",
            "2026-9-5",
            "2026-13-01",
            "2025-02-29",
            "2026-04-31",
            "2026-09-05T24:00:00Z",
            "2026-09-05T10:60",
            "2026-09-05T10:00:61",
            "2026-09-05T10:00:00.",
            "2026-09-05T10:00:00+2",
            "2026-09-05T10:00:00Zjunk",
            "2026-09-05T",
            "2026-09-05x10:00",
        ] {
            assert!(!is_iso_8601(text), "{text}");
        }
    }
}

//! Go's `time.ParseDuration` and `Duration.String`, for flags and settings
//! that take a duration the way Go's `flag.Duration` does (`90s`, `10m`,
//! `1h30m`, `1.5h`, `250ms`; `0` alone needs no unit).
//!
//! Units: `ns`, `us` (also `µs`, `μs`), `ms`, `s`, `m`, `h`; a leading `+`
//! or `-`; each number may have a fraction. Anything else, or a value
//! past `i64` nanoseconds, is refused (Go's `flag` package reports every
//! such failure as `parse error`).

/// Nanoseconds per unit, longest names first where one is a prefix.
const UNITS: &[(&str, u128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),
    ("\u{3bc}s", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Parses `text` as Go does; the value is in nanoseconds (negative
/// allowed, as in Go).
pub(crate) fn parse(text: &str) -> Result<i64, String> {
    let invalid = || {
        format!(
            "time: invalid duration {}",
            crate::base::goerr::go_quote(text.as_bytes())
        )
    };
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(0);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let whole_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (whole, after) = rest.split_at(whole_len);
        let (fraction, after) = match after.strip_prefix('.') {
            Some(f) => {
                let n = f.bytes().take_while(u8::is_ascii_digit).count();
                f.split_at(n)
            }
            None => ("", after),
        };
        if whole.is_empty() && fraction.is_empty() {
            return Err(invalid());
        }
        let unit_len = after
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(after.len(), |(i, _)| i);
        let (unit, next) = after.split_at(unit_len);
        if unit.is_empty() {
            return Err(format!(
                "time: missing unit in duration {}",
                crate::base::goerr::go_quote(text.as_bytes())
            ));
        }
        let Some(&(_, scale)) = UNITS.iter().find(|(name, _)| *name == unit) else {
            return Err(format!(
                "time: unknown unit {} in duration {}",
                crate::base::goerr::go_quote(unit.as_bytes()),
                crate::base::goerr::go_quote(text.as_bytes())
            ));
        };
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| invalid())?
        };
        let mut part = whole.checked_mul(scale).ok_or_else(invalid)?;
        // The fraction, digit by digit, as far as it still counts.
        let mut weight = scale;
        for digit in fraction.bytes() {
            weight /= 10;
            if weight == 0 {
                break;
            }
            part += u128::from(digit - b'0') * weight;
        }
        total = total.checked_add(part).ok_or_else(invalid)?;
        if total > i64::MAX as u128 + u128::from(negative) {
            return Err(invalid());
        }
        rest = next;
    }
    let magnitude = i128::try_from(total).map_err(|_| invalid())?;
    let signed = if negative { -magnitude } else { magnitude };
    i64::try_from(signed).map_err(|_| invalid())
}

/// Go's `Duration.String` for a non-negative duration: `0s`, `250ms`,
/// `1.5s`, `1m30s`, `2h0m0s`.
pub(crate) fn text(d: std::time::Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        return "0s".to_string();
    }
    if ns < 1_000_000_000 {
        let (scale, unit) = match ns {
            n if n < 1_000 => (1, "ns"),
            n if n < 1_000_000 => (1_000, "\u{b5}s"),
            _ => (1_000_000, "ms"),
        };
        return format!("{}{unit}", decimal(ns, scale));
    }
    let hours = ns / 3_600_000_000_000;
    let minutes = ns / 60_000_000_000 % 60;
    let seconds = decimal(ns % 60_000_000_000, 1_000_000_000);
    match (hours, minutes) {
        (0, 0) => format!("{seconds}s"),
        (0, m) => format!("{m}m{seconds}s"),
        (h, m) => format!("{h}h{m}m{seconds}s"),
    }
}

/// `value / scale` with the fraction's trailing zeros dropped.
fn decimal(value: u128, scale: u128) -> String {
    let whole = value / scale;
    let fraction = value % scale;
    if fraction == 0 {
        return whole.to_string();
    }
    let width = scale.to_string().len() - 1;
    let digits = format!("{fraction:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn go_duration_syntax() {
        let ok = |s: &str| parse(s).unwrap();
        assert_eq!(ok("0"), 0);
        assert_eq!(ok("90s"), 90_000_000_000);
        assert_eq!(ok("10m"), 600_000_000_000);
        assert_eq!(ok("1h30m"), 5_400_000_000_000);
        assert_eq!(ok("1.5h"), 5_400_000_000_000);
        assert_eq!(ok(".5s"), 500_000_000);
        assert_eq!(ok("250ms"), 250_000_000);
        assert_eq!(ok("3\u{b5}s"), 3_000);
        assert_eq!(ok("-2s"), -2_000_000_000);
        assert_eq!(ok("+2s"), 2_000_000_000);
        assert_eq!(ok("1.0000000001s"), 1_000_000_000);
        assert_eq!(parse("1").unwrap_err(), "time: missing unit in duration \"1\"");
        assert_eq!(parse("1d").unwrap_err(), "time: unknown unit \"d\" in duration \"1d\"");
        for bad in ["", "-", "s", ".s", "1.s.", "3000000h", "9223372036854775808ns"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn go_duration_text() {
        assert_eq!(text(Duration::ZERO), "0s");
        assert_eq!(text(Duration::from_millis(250)), "250ms");
        assert_eq!(text(Duration::from_millis(1500)), "1.5s");
        assert_eq!(text(Duration::from_secs(90)), "1m30s");
        assert_eq!(text(Duration::from_secs(7200)), "2h0m0s");
        assert_eq!(text(Duration::from_micros(3)), "3\u{b5}s");
    }
}

//! The timestamps of hook envelopes and audit entries.
//!
//! Every proxied `tools/call` stamps four hooks and four audit entries, so
//! the formatting is done by hand into a fixed-width buffer: the generic
//! `time` formatter walked its format description and allocated for each
//! component, which showed in profiles of the per-call cost.

use std::cell::Cell;
use std::time::{SystemTime, UNIX_EPOCH};

/// Length of `YYYY-MM-DDTHH:MM:SS.mmmZ`.
const LEN: usize = 24;

/// Used when the clock is before 1970 or beyond year 9999.
const FALLBACK: &str = "1970-01-01T00:00:00.000Z";

/// The current time as an RFC 3339 UTC timestamp with milliseconds.
///
/// Fixed width, so that hashed entries are reproducible byte for byte and
/// entries sort as text.
pub fn now_rfc3339() -> String {
    Stamp::now().as_str().to_owned()
}

/// A timestamp as [`now_rfc3339`] spells it, kept inline: the audit queue
/// stamps every entry it numbers, and a `String` each was an allocation
/// per hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp([u8; LEN]);

impl Stamp {
    /// Now.
    pub fn now() -> Self {
        match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(since) => Self(format_millis(since.as_secs(), since.subsec_millis())),
            Err(_) => Self::fallback(),
        }
    }

    fn fallback() -> Self {
        let mut bytes = [0u8; LEN];
        bytes.copy_from_slice(FALLBACK.as_bytes());
        Self(bytes)
    }

    /// The timestamp's text.
    pub fn as_str(&self) -> &str {
        // Every byte is an ASCII digit or separator (see `format_millis`),
        // so this cannot fail; checked, not lossy, because the lossy
        // conversion walks the bytes as UTF-8 chunks before copying them.
        std::str::from_utf8(&self.0).unwrap_or(FALLBACK)
    }
}

/// When a hook fired, as its envelope spells it: stamped now, inline
/// (a `String` per hook was an allocation per hook), or as a hook file
/// replayed by `acs-proxy policy test` gives it, which need not be in the
/// proxy's fixed-width form.
#[derive(Clone, PartialEq, Eq)]
pub enum HookTime {
    /// Stamped by the proxy's clock.
    Stamped(Stamp),
    /// Given as text.
    Given(Box<str>),
}

impl HookTime {
    /// Now.
    pub fn now() -> Self {
        Self::Stamped(Stamp::now())
    }

    /// The timestamp's text.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Stamped(stamp) => stamp.as_str(),
            Self::Given(text) => text,
        }
    }
}

/// Read as the `&str` the field was when it was a `String`.
impl std::ops::Deref for HookTime {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl std::fmt::Display for HookTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Debug for HookTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

/// A timestamp given as text.
impl From<String> for HookTime {
    fn from(text: String) -> Self {
        Self::Given(text.into())
    }
}

/// Formats `unix_secs` seconds and `millis` milliseconds after the epoch.
fn format_millis(unix_secs: u64, millis: u32) -> [u8; LEN] {
    let Some(mut out) = SECOND.with(|last| match last.get() {
        Some((secs, spelled)) if secs == unix_secs => Some(spelled),
        _ => {
            let spelled = format_second(unix_secs)?;
            last.set(Some((unix_secs, spelled)));
            Some(spelled)
        }
    }) else {
        return Stamp::fallback().0;
    };
    put(&mut out[20..23], millis.min(999));
    out
}

thread_local! {
    /// The last second this thread spelled: a call stamps four hooks and
    /// four entries, and between them mostly only the milliseconds change.
    static SECOND: Cell<Option<(u64, [u8; LEN])>> = const { Cell::new(None) };
}

/// `unix_secs` spelled to the second, its milliseconds left as `000`;
/// `None` past year 9999.
fn format_second(unix_secs: u64) -> Option<[u8; LEN]> {
    let days = unix_secs / 86_400;
    let of_day = unix_secs % 86_400;
    let (year, month, day) = civil_from_days(days)?;
    let mut out = [0u8; LEN];
    put(&mut out[0..4], year);
    out[4] = b'-';
    put(&mut out[5..7], month);
    out[7] = b'-';
    put(&mut out[8..10], day);
    out[10] = b'T';
    put(&mut out[11..13], (of_day / 3600) as u32);
    out[13] = b':';
    put(&mut out[14..16], (of_day / 60 % 60) as u32);
    out[16] = b':';
    put(&mut out[17..19], (of_day % 60) as u32);
    out[19] = b'.';
    put(&mut out[20..23], 0);
    out[23] = b'Z';
    Some(out)
}

/// Writes `value` as exactly `out.len()` decimal digits, zero-padded.
fn put(out: &mut [u8], mut value: u32) {
    for digit in out.iter_mut().rev() {
        *digit = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

/// Year, month and day of `days` after 1970-01-01 (proleptic Gregorian),
/// `None` past year 9999. Howard Hinnant's `civil_from_days`.
fn civil_from_days(days: u64) -> Option<(u32, u32, u32)> {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    if year > 9999 {
        return None;
    }
    Some((year as u32, month as u32, day as u32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::format_description;
    use time::OffsetDateTime;

    fn reference(unix_secs: i64, millis: u32) -> String {
        let format = format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
        );
        let at = OffsetDateTime::from_unix_timestamp(unix_secs).unwrap()
            + time::Duration::milliseconds(i64::from(millis));
        at.format(format).unwrap()
    }

    #[test]
    fn matches_the_time_crate_over_the_calendar() {
        // Leap days, century and 400-year rules, month and year ends.
        let mut samples = vec![
            0,
            951_782_400,   // 2000-02-29
            4_107_542_400, // 2100-02-28
            4_107_628_800, // 2100-03-01
            253_402_300_799,
        ];
        let mut secs = 0i64;
        while secs < 253_402_300_799 {
            samples.push(secs);
            secs += 86_400 * 37 + 3_601 * 7 + 13;
        }
        for (index, secs) in samples.into_iter().enumerate() {
            let millis = (index as u32 * 7) % 1000;
            assert_eq!(
                Stamp(format_millis(secs as u64, millis)).as_str(),
                reference(secs, millis),
                "{secs}"
            );
        }
    }

    #[test]
    fn now_is_fixed_width_rfc3339() {
        let ts = now_rfc3339();
        assert_eq!(ts.len(), LEN, "{ts}");
        assert!(OffsetDateTime::parse(&ts, &time::format_description::well_known::Rfc3339).is_ok());
    }

    #[test]
    fn the_same_second_again_keeps_its_spelling_and_changes_its_milliseconds() {
        let second = 1_764_979_200; // 2025-12-06T00:00:00
        for (secs, millis) in [
            (second, 5),
            (second, 999),
            (second + 1, 0),
            (second, 42),
            (second + 86_399, 1),
            (second + 86_399, 998),
        ] {
            assert_eq!(
                Stamp(format_millis(secs, millis)).as_str(),
                reference(secs as i64, millis),
                "{secs} {millis}"
            );
        }
    }

    #[test]
    fn beyond_year_9999_falls_back() {
        assert_eq!(Stamp(format_millis(253_402_300_800, 0)).as_str(), FALLBACK);
    }
}

//! `sbatch --begin` as SLURM users write it (`gantry submit --begin`, `#SBATCH --begin`):
//! `now+N[unit]` (seconds by default; minutes, hours, days, weeks), `HH:MM[:SS]` (today, or
//! tomorrow once that time has passed), `YYYY-MM-DD[THH:MM[:SS]]`, and the words `today`,
//! `tomorrow`, `midnight`, `noon`, `fika` (15:00) and `teatime` (16:00), in the local time
//! zone. The daemon gets milliseconds since the epoch (`begin_ms`).
//!
//! Owns this parsing. Does not own what waiting means (the daemon's `scheduler::holds`).

use jiff::Zoned;
use jiff::civil::{Date, Time};

const HINT: &str = "give now+N[minutes|hours|days|weeks], HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]], \
                    today, tomorrow, midnight, noon, fika or teatime";

/// The begin time `text` means at `now`, in ms since the epoch.
pub fn parse(text: &str, now: &Zoned) -> Result<u64, String> {
    let text = text.trim();
    let bad = || format!("cannot read begin time {text:?}: {HINT}");
    let lower = text.to_ascii_lowercase();
    let at_ms = if let Some(rest) = lower.strip_prefix("now") {
        now.timestamp().as_millisecond() + offset_ms(rest).ok_or_else(bad)?
    } else if let Some(time) = named_time(&lower) {
        next_at(now, time).ok_or_else(bad)?
    } else if lower == "today" {
        now.timestamp().as_millisecond()
    } else if lower == "tomorrow" {
        let day = now.date().tomorrow().map_err(|_| bad())?;
        at(now, day, Time::midnight()).ok_or_else(bad)?
    } else if !text.contains('-') {
        // A time of day (jiff would also read the time out of a date and time).
        let time = text.parse::<Time>().map_err(|_| bad())?;
        next_at(now, time).ok_or_else(bad)?
    } else if !text.contains('T') {
        let day = text.parse::<Date>().map_err(|_| bad())?;
        at(now, day, Time::midnight()).ok_or_else(bad)?
    } else {
        let when = text.parse::<jiff::civil::DateTime>().map_err(|_| bad())?;
        when.to_zoned(now.time_zone().clone())
            .map_err(|_| bad())?
            .timestamp()
            .as_millisecond()
    };
    u64::try_from(at_ms).map_err(|_| bad())
}

/// `+N[unit]` (or nothing) as milliseconds.
fn offset_ms(rest: &str) -> Option<i64> {
    if rest.is_empty() {
        return Some(0);
    }
    let rest = rest.strip_prefix('+')?;
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    let n: i64 = rest[..digits].parse().ok()?;
    let unit_s = match &rest[digits..] {
        "" | "s" | "sec" | "secs" | "second" | "seconds" => 1,
        "m" | "min" | "mins" | "minute" | "minutes" => 60,
        "h" | "hour" | "hours" => 3600,
        "d" | "day" | "days" => 86_400,
        "w" | "week" | "weeks" => 7 * 86_400,
        _ => return None,
    };
    n.checked_mul(unit_s)?.checked_mul(1000)
}

fn named_time(word: &str) -> Option<Time> {
    let hour = match word {
        "midnight" => 0,
        "noon" => 12,
        "fika" => 15,
        "teatime" => 16,
        _ => return None,
    };
    Time::new(hour, 0, 0, 0).ok()
}

fn at(now: &Zoned, day: Date, time: Time) -> Option<i64> {
    let zoned = day
        .to_datetime(time)
        .to_zoned(now.time_zone().clone())
        .ok()?;
    Some(zoned.timestamp().as_millisecond())
}

/// The next `time` of day: today, or tomorrow once it has passed.
fn next_at(now: &Zoned, time: Time) -> Option<i64> {
    let today = at(now, now.date(), time)?;
    if today > now.timestamp().as_millisecond() {
        return Some(today);
    }
    at(now, now.date().tomorrow().ok()?, time)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn now() -> Zoned {
        "2026-12-03T10:30:00+00:00[UTC]".parse().unwrap()
    }

    fn at(text: &str) -> String {
        let ms = parse(text, &now()).unwrap();
        jiff::Timestamp::from_millisecond(i64::try_from(ms).unwrap())
            .unwrap()
            .to_string()
    }

    #[test]
    fn the_forms_sbatch_takes() {
        assert_eq!(at("now"), "2026-12-03T10:30:00Z");
        assert_eq!(at("now+90"), "2026-12-03T10:31:30Z");
        assert_eq!(at("now+1hour"), "2026-12-03T11:30:00Z");
        assert_eq!(at("now+2days"), "2026-12-05T10:30:00Z");
        assert_eq!(at("16:00"), "2026-12-03T16:00:00Z");
        assert_eq!(
            at("09:15:30"),
            "2026-12-04T09:15:30Z",
            "past today: tomorrow"
        );
        assert_eq!(at("2026-12-24"), "2026-12-24T00:00:00Z");
        assert_eq!(at("2026-12-24T18:00"), "2026-12-24T18:00:00Z");
        assert_eq!(at("tomorrow"), "2026-12-04T00:00:00Z");
        assert_eq!(at("midnight"), "2026-12-04T00:00:00Z");
        assert_eq!(at("noon"), "2026-12-03T12:00:00Z");
        assert_eq!(at("teatime"), "2026-12-03T16:00:00Z");
        for wrong in ["soon", "now+3fortnights", "now-5", "25:00", "12/24"] {
            let e = parse(wrong, &now()).unwrap_err();
            assert!(e.contains("now+N"), "{wrong}: {e}");
        }
    }
}

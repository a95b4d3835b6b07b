//! `edgecache stat`: the admin API's counters (`GET /stats`) as varnishstat shows them, either
//! one plain dump of every counter (`-1`) or a screen that refreshes in place with the rates
//! of the last interval. Rendering only: the command's loop fetches the snapshots.

use std::fmt::Write;
use std::time::Duration;

use serde_json::Value;

/// The counters of one `GET /stats` answer, flattened to dotted names (`cache.objects`,
/// `backend.default.fetches`), in the order the answer lists them.
#[derive(Clone, Debug)]
pub struct Snapshot {
    counters: Vec<(String, f64)>,
    backends: Vec<BackendRow>,
}

#[derive(Clone, Debug)]
struct BackendRow {
    name: String,
    healthy: bool,
    fetches: f64,
    failures: f64,
    in_flight: f64,
}

impl Snapshot {
    /// Reads the body of `GET /stats`.
    pub fn parse(stats: &str) -> Result<Snapshot, String> {
        let value: Value =
            serde_json::from_str(stats).map_err(|error| format!("GET /stats is not JSON: {error}"))?;
        let mut snapshot = Snapshot {
            counters: Vec::new(),
            backends: Vec::new(),
        };
        snapshot.flatten("", &value);
        for backend in value
            .get("backends")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let number = |field: &str| backend.get(field).and_then(Value::as_f64).unwrap_or(0.0);
            snapshot.backends.push(BackendRow {
                name: backend
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string(),
                healthy: backend.get("healthy").and_then(Value::as_bool).unwrap_or(false),
                fetches: number("fetches"),
                failures: number("failures"),
                in_flight: number("in_flight"),
            });
        }
        Ok(snapshot)
    }

    /// Numbers and booleans (1 or 0) become counters; a list of objects with a `name`, such as
    /// the backends, is keyed by that name (`backend.NAME.field`). Texts and other lists are
    /// not counters.
    fn flatten(&mut self, prefix: &str, value: &Value) {
        let name = |key: &str| match prefix {
            "" => key.to_string(),
            _ => format!("{prefix}.{key}"),
        };
        match value {
            Value::Number(number) => self
                .counters
                .push((prefix.to_string(), number.as_f64().unwrap_or(0.0))),
            Value::Bool(flag) => self
                .counters
                .push((prefix.to_string(), f64::from(u8::from(*flag)))),
            Value::Object(fields) => {
                for (key, field) in fields {
                    let key = match key.as_str() {
                        "backends" => "backend",
                        other => other,
                    };
                    self.flatten(&name(key), field);
                }
            }
            Value::Array(items) => {
                for item in items {
                    if let Some(item_name) = item.get("name").and_then(Value::as_str) {
                        self.flatten(&name(item_name), item);
                    }
                }
            }
            Value::Null | Value::String(_) => {}
        }
    }

    /// A counter's value; 0 for a name the server does not report.
    pub fn get(&self, name: &str) -> f64 {
        self.counters
            .iter()
            .find(|(counter, _)| counter == name)
            .map_or(0.0, |(_, value)| *value)
    }

    /// `stat -1`: every counter on a line of its own, `name value`, as `varnishstat -1`.
    pub fn dump(&self) -> String {
        let width = self
            .counters
            .iter()
            .map(|(name, _)| name.len())
            .max()
            .unwrap_or(0);
        let mut text = String::new();
        for (name, value) in &self.counters {
            let _ = writeln!(text, "{name:<width$}  {value}");
        }
        text
    }
}

/// The counters the live screen shows with a rate, in this order.
const RATED: [(&str, &str); 9] = [
    ("requests", "requests"),
    ("hits", "cache hits"),
    ("misses", "cache misses"),
    ("passes", "passes"),
    ("stale", "stale (grace)"),
    ("revalidated", "revalidated"),
    ("synth", "synthetic"),
    ("coalesced_waits", "coalesced waits"),
    ("cache.evictions", "evictions"),
];

/// One screen of the live view: totals, rates over the time since `previous` (none on the
/// first screen), the hit ratio, the store, the bans and each backend's health. It starts
/// with the escape sequence that homes the cursor and clears the screen, so that each screen
/// replaces the last.
pub fn screen(source: &str, previous: Option<(&Snapshot, Duration)>, current: &Snapshot) -> String {
    let mut text = String::from("\x1b[H\x1b[2J");
    let _ = writeln!(text, "edgecache stat  {source}  (Ctrl-C quits)\n");
    let _ = writeln!(text, "{:<18}{:>14}{:>14}", "", "total", "per second");
    for (counter, label) in RATED {
        let total = current.get(counter);
        let rate = match previous {
            Some((before, elapsed)) if !elapsed.is_zero() => {
                format!(
                    "{:.1}",
                    (total - before.get(counter)).max(0.0) / elapsed.as_secs_f64()
                )
            }
            _ => "-".to_string(),
        };
        let _ = writeln!(text, "{label:<18}{total:>14}{rate:>14}");
    }
    let ratio = |hits: f64, lookups: f64| match lookups > 0.0 {
        true => format!("{:.1} %", 100.0 * hits / lookups),
        false => "-".to_string(),
    };
    let lookups = |snapshot: &Snapshot| snapshot.get("hits") + snapshot.get("misses") + snapshot.get("stale");
    let recent = match previous {
        Some((before, _)) => ratio(
            current.get("hits") - before.get("hits"),
            lookups(current) - lookups(before),
        ),
        None => "-".to_string(),
    };
    let _ = writeln!(
        text,
        "\nhit ratio         {} since start, {recent} in the last interval",
        ratio(current.get("hits"), lookups(current))
    );
    let _ = writeln!(
        text,
        "store             {} objects, {}, {} evicted",
        current.get("cache.objects"),
        bytes(current.get("cache.bytes")),
        current.get("cache.evictions")
    );
    let _ = writeln!(
        text,
        "bans              {} on the list, {} tests at lookup",
        current.get("bans"),
        current.get("bans_tested")
    );
    let _ = writeln!(
        text,
        "\n{:<20}{:>9}{:>10}{:>10}{:>11}",
        "backend", "health", "fetches", "failures", "in flight"
    );
    for backend in &current.backends {
        let health = if backend.healthy { "healthy" } else { "sick" };
        let _ = writeln!(
            text,
            "{:<20}{health:>9}{:>10}{:>10}{:>11}",
            backend.name, backend.fetches, backend.failures, backend.in_flight
        );
    }
    text
}

/// `bytes` in the largest binary unit that keeps it at or above 1.
fn bytes(bytes: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    match unit {
        0 => format!("{value} B"),
        _ => format!("{value:.1} {}", units[unit]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATS: &str = r#"{"backends":[{"name":"default","healthy":true,"fetches":4,"failures":1,
        "in_flight":0,"resolved":["127.0.0.1:9"],"probe":null}],"bans":2,"bans_tested":7,
        "cache":{"bytes":3072,"evictions":0,"objects":3},"hits":6,"misses":3,"requests":10,"stale":1}"#;

    #[test]
    fn dump_has_every_number_under_a_dotted_name() {
        let snapshot = Snapshot::parse(STATS).unwrap();
        let dump = snapshot.dump();
        for line in [
            "backend.default.fetches",
            "backend.default.healthy",
            "cache.objects",
            "requests",
        ] {
            assert!(
                dump.lines().any(|text| text.starts_with(line)),
                "{line} in {dump}"
            );
        }
        assert_eq!(snapshot.get("backend.default.healthy"), 1.0);
        assert_eq!(snapshot.get("cache.bytes"), 3072.0);
        assert!(!dump.contains("resolved"), "texts are not counters: {dump}");
    }

    #[test]
    fn screen_rates_are_per_second_over_the_interval() {
        let before = Snapshot::parse(STATS).unwrap();
        let after = Snapshot::parse(&STATS.replace(r#""requests":10"#, r#""requests":30"#)).unwrap();
        let screen = screen("127.0.0.1:6082", Some((&before, Duration::from_secs(2))), &after);
        let requests = screen.lines().find(|line| line.starts_with("requests")).unwrap();
        assert!(requests.ends_with("10.0"), "{requests}");
        assert!(screen.contains("60.0 % since start"), "{screen}");
        assert!(screen.contains("3.0 KiB"), "{screen}");
        assert!(
            screen.contains("default") && screen.contains("healthy"),
            "{screen}"
        );
    }

    #[test]
    fn first_screen_has_no_rates() {
        let snapshot = Snapshot::parse(STATS).unwrap();
        let screen = screen("x", None, &snapshot);
        let requests = screen.lines().find(|line| line.starts_with("requests")).unwrap();
        assert!(requests.ends_with('-'), "{requests}");
    }
}

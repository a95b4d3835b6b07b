//! Parsers for the value syntaxes shared by flags and the TOML file.

use std::time::Duration;

use ipnet::IpNet;

/// Parses a byte size: a number with an optional `k`, `m`, `g` or `t` suffix (powers of 1024,
/// an optional trailing `b`/`ib` is accepted), e.g. `256m`, `1G`, `64KiB`, `1048576`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let lower = text.trim().to_ascii_lowercase();
    let unitless = lower.trim_end_matches("ib").trim_end_matches('b');
    let (digits, shift) = match unitless.chars().last() {
        Some('k') => (&unitless[..unitless.len() - 1], 10),
        Some('m') => (&unitless[..unitless.len() - 1], 20),
        Some('g') => (&unitless[..unitless.len() - 1], 30),
        Some('t') => (&unitless[..unitless.len() - 1], 40),
        _ => (unitless, 0),
    };
    let number: u64 = digits
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a size"))?;
    number
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("`{text}` is too large"))
}

/// The units of [`parse_duration`], as Varnish's duration parameters take them.
const DURATION_UNITS: &str = "ms, s, m, h, d, w, y";

/// Parses a duration: plain seconds (`120`, `1.5`) or a number with a Varnish unit
/// (`ms`, `s`, `m`, `h`, `d`, `w`, `y` of 365 days), e.g. `500ms`, `2m`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration"))?;
    let scale = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 0.001,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        "w" => 604_800.0,
        "y" => 31_536_000.0,
        other => {
            return Err(format!(
                "`{other}` is not a duration unit (units: {DURATION_UNITS}; none means seconds)"
            ))
        }
    };
    Duration::try_from_secs_f64(value * scale).map_err(|_| format!("`{text}` is out of range"))
}

/// Parses a listener as varnishd's `-a`: `IP:PORT`, or `:PORT` for every interface, then
/// options after commas: one protocol, `HTTP` (the default) or `PROXY` (varnishd compares
/// them case-insensitively), and `tls`.
pub fn parse_listen(text: &str) -> Result<super::ListenSpec, String> {
    let mut parts = text.split(',');
    let address = parts.next().unwrap_or_default().trim();
    let full = match address.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => address.to_string(),
    };
    let addr = full
        .parse::<std::net::SocketAddr>()
        .map_err(|_| format!("`{address}` is not IP:PORT (or :PORT for every interface)"))?;
    let mut spec = super::ListenSpec::from(addr);
    let mut protocol = None;
    let mut tls = false;
    for option in parts.map(str::trim) {
        if option.eq_ignore_ascii_case("tls") && !tls {
            tls = true;
        } else if (option.eq_ignore_ascii_case("HTTP") || option.eq_ignore_ascii_case("PROXY"))
            && protocol.is_none()
        {
            protocol = Some(option);
        } else {
            return Err(format!(
                "`{option}` in `{text}` is not a listener option (or is given twice); \
                 accepted after the address: one of ,HTTP or ,PROXY, and ,tls"
            ));
        }
    }
    spec.proxy_protocol = protocol.is_some_and(|name| name.eq_ignore_ascii_case("PROXY"));
    spec.tls = tls;
    Ok(spec)
}

/// Parses varnishd's `-s`: the cache size as `SIZE`, `malloc,SIZE`, `default,SIZE` or
/// `NAME=malloc,SIZE` (edgecache has one in-memory store, so the name is only a label).
/// Other storage types (`file`, `persistent`, ...) are refused.
pub fn parse_storage(text: &str) -> Result<u64, String> {
    const ACCEPTED: &str = "accepted: SIZE, malloc,SIZE, default,SIZE or NAME=malloc,SIZE";
    let spec = text.split_once('=').map_or(text, |(_name, spec)| spec).trim();
    let (kind, size) = match spec.split_once(',') {
        Some((kind, size)) => (kind.trim(), size),
        None if spec.starts_with(|c: char| c.is_ascii_digit()) => return parse_size(spec),
        None => (spec, ""),
    };
    match kind {
        "malloc" | "default" if size.is_empty() => Err(format!(
            "`{text}` has no size (edgecache's cache is bounded); {ACCEPTED}"
        )),
        "malloc" | "default" => parse_size(size),
        other => Err(format!(
            "storage `{other}` is not available: edgecache keeps its cache in memory; {ACCEPTED}"
        )),
    }
}

/// Parses a comma-separated list of networks; a bare address means that one host.
pub fn parse_cidr_list(text: &str) -> Result<Vec<IpNet>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(|part| {
            part.parse::<IpNet>()
                .or_else(|_| part.parse::<std::net::IpAddr>().map(IpNet::from))
                .map_err(|_| format!("`{part}` is not an address or CIDR network"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses() {
        for (text, want) in [
            ("127.0.0.1:8080", "127.0.0.1:8080"),
            (":6081", "0.0.0.0:6081"),
            ("[::1]:80", "[::1]:80"),
            (":6086,PROXY", "0.0.0.0:6086,PROXY"),
            (":6086,proxy", "0.0.0.0:6086,PROXY"),
            ("127.0.0.1:80,HTTP", "127.0.0.1:80"),
            (":443,tls", "0.0.0.0:443,tls"),
            (":443,PROXY,tls", "0.0.0.0:443,PROXY,tls"),
            (":443,tls,PROXY", "0.0.0.0:443,PROXY,tls"),
        ] {
            assert_eq!(parse_listen(text).unwrap().to_string(), want, "{text}");
        }
        assert!(parse_listen("6081").unwrap_err().contains(":PORT"));
        for refused in [
            ":80,PROXY,HTTP",
            ":80,PROXY,PROXY",
            ":80,tls,tls",
            ":80,h2",
            ":80,",
        ] {
            let error = parse_listen(refused).unwrap_err();
            assert!(error.contains(",PROXY"), "{refused}: {error}");
        }
    }

    #[test]
    fn sizes() {
        for (text, want) in [
            ("1024", Some(1024)),
            ("256m", Some(256 << 20)),
            ("1G", Some(1 << 30)),
            ("64KiB", Some(64 << 10)),
            ("64kb", Some(64 << 10)),
            ("12x", None),
            ("", None),
            ("-1", None),
        ] {
            assert_eq!(parse_size(text).ok(), want, "{text}");
        }
    }

    #[test]
    fn durations() {
        for (text, want) in [
            ("120", Some(Duration::from_secs(120))),
            ("1.5s", Some(Duration::from_millis(1500))),
            ("500ms", Some(Duration::from_millis(500))),
            ("2m", Some(Duration::from_secs(120))),
            ("1d", Some(Duration::from_secs(86_400))),
            ("1y", Some(Duration::from_secs(365 * 86_400))),
            ("abc", None),
        ] {
            assert_eq!(parse_duration(text).ok(), want, "{text}");
        }
    }

    #[test]
    fn an_unknown_duration_unit_lists_the_units() {
        let error = parse_duration("2min").unwrap_err();
        assert!(
            error.contains("`min`") && error.contains("ms, s, m, h, d, w, y"),
            "{error}"
        );
    }

    #[test]
    fn storage_as_varnishd_writes_it() {
        for text in [
            "256m",
            "malloc,256m",
            "default,256m",
            "s0=malloc,256m",
            "malloc, 256M",
        ] {
            assert_eq!(parse_storage(text), Ok(256 << 20), "{text}");
        }
        for refused in ["file,/var/lib/varnish/cache,1g", "s0=persistent,/x,1g", "umem,1g"] {
            let error = parse_storage(refused).unwrap_err();
            assert!(
                error.contains("malloc,SIZE") && error.contains("in memory"),
                "{refused}: {error}"
            );
        }
        assert!(parse_storage("malloc,lots").unwrap_err().contains("not a size"));
    }

    #[test]
    fn cidrs() {
        assert_eq!(parse_cidr_list("127.0.0.1, 10.0.0.0/8").unwrap().len(), 2);
        assert!(parse_cidr_list("nope").is_err());
    }
}

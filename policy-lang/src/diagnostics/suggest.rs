//! Did-you-mean: the closest candidate within a distance that grows with the name's length.
//!
//! After starlark's `did_you_mean.rs`.

/// The best candidate for `name`, if one is close enough.
pub(crate) fn did_you_mean<'a, I>(name: &str, candidates: I) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let lower = name.to_ascii_lowercase();
    let threshold = match name.len() {
        0..=3 => 1,
        4..=8 => 2,
        _ => 3,
    };
    let mut best: Option<(usize, &'a str)> = None;
    for c in candidates {
        if c == name {
            continue;
        }
        let d = strsim::levenshtein(&lower, &c.to_ascii_lowercase());
        if d <= threshold && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::did_you_mean;

    #[test]
    fn finds_close_names() {
        let vars = ["beresp.ttl", "beresp.grace", "req.url", "req.method"];
        assert_eq!(did_you_mean("beresp.tll", vars), Some("beresp.ttl"));
        assert_eq!(did_you_mean("req.ulr", vars), Some("req.url"));
        assert_eq!(did_you_mean("completely.else", vars), None);
    }
}

//! Reading a Prometheus text exposition (onelog's `GET /metrics`) in tests: samples by name
//! and labels. Only what the tests need: no exemplars, no escaping inside label values beyond
//! `\"` and `\\`.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use anyhow::{bail, Context, Result};

/// One sample: metric name (with its `_total`, `_bucket`, ... suffix), labels, value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

#[derive(Debug, Clone, Default)]
pub struct Scrape {
    pub samples: Vec<Sample>,
}

impl Scrape {
    /// `GET /metrics` of the admin API at `addr`.
    pub fn of(addr: SocketAddr) -> Result<Scrape> {
        let response = crate::admin_api::request(addr, "GET", "/metrics")?;
        if response.status != 200 {
            bail!("GET /metrics on {addr}: HTTP {}: {}", response.status, response.text());
        }
        Scrape::parse(&response.text())
    }

    pub fn parse(text: &str) -> Result<Scrape> {
        let mut samples = Vec::new();
        for (n, line) in text.lines().enumerate() {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            samples.push(parse_sample(line).with_context(|| format!("line {}: {line:?}", n + 1))?);
        }
        Ok(Scrape { samples })
    }

    /// Samples named `name` whose labels include every pair of `labels`.
    pub fn matching<'a>(
        &'a self,
        name: &'a str,
        labels: &'a [(&str, &str)],
    ) -> impl Iterator<Item = &'a Sample> {
        self.samples.iter().filter(move |s| {
            s.name == name && labels.iter().all(|(k, v)| s.labels.get(*k).is_some_and(|x| x == v))
        })
    }

    /// The sum of the matching samples (0 when there are none: a counter not yet incremented
    /// is not exposed).
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.matching(name, labels).map(|s| s.value).sum()
    }

    /// The one matching sample's value.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Result<f64> {
        let found: Vec<&Sample> = self.matching(name, labels).collect();
        match found.as_slice() {
            [one] => Ok(one.value),
            _ => bail!("{} samples of {name} with {labels:?}, expected one", found.len()),
        }
    }
}

fn parse_sample(line: &str) -> Result<Sample> {
    let (series, value) = line.rsplit_once(' ').context("no value")?;
    let value: f64 = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().context("value")?,
    };
    let (name, labels) = match series.split_once('{') {
        None => (series, BTreeMap::new()),
        Some((name, rest)) => (name, parse_labels(rest.strip_suffix('}').context("unclosed labels")?)?),
    };
    Ok(Sample { name: name.to_string(), labels, value })
}

fn parse_labels(mut rest: &str) -> Result<BTreeMap<String, String>> {
    let mut labels = BTreeMap::new();
    while !rest.is_empty() {
        let (key, after) = rest.split_once("=\"").context("label without =\"")?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next() {
                Some((i, '"')) => break i,
                Some((_, '\\')) => value.extend(chars.next().map(|(_, c)| c)),
                Some((_, c)) => value.push(c),
                None => bail!("unterminated label value"),
            }
        };
        labels.insert(key.trim_start_matches(',').to_string(), value);
        rest = after[end + 1..].trim_start_matches(',');
    }
    Ok(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_samples_with_and_without_labels() {
        let text = "# TYPE x counter\nx_total{api=\"Produce\",version=\"9\"} 3\nup 1\nh_bucket{le=\"+Inf\"} 2\n# EOF\n";
        let scrape = Scrape::parse(text).unwrap();
        assert_eq!(scrape.value("x_total", &[("api", "Produce")]).unwrap(), 3.0);
        assert_eq!(scrape.value("up", &[]).unwrap(), 1.0);
        assert_eq!(scrape.sum("h_bucket", &[("le", "+Inf")]), 2.0);
        assert_eq!(scrape.sum("missing", &[]), 0.0);
        let quoted = Scrape::parse("q{a=\"x\\\"y\",b=\"z\"} 1.5").unwrap();
        assert_eq!(quoted.samples[0].labels["a"], "x\"y");
        assert_eq!(quoted.samples[0].labels["b"], "z");
    }
}

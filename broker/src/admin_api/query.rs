//! The admin API's parameters: a request's method, path and decoded query string, and the
//! refusals handlers answer with (an HTTP status and a message). HTTP itself is hyper's
//! (`server`); parameters travel in the query string, so no endpoint reads a body.

use std::collections::BTreeMap;

use percent_encoding::percent_decode_str;

/// A request the API refuses, with the HTTP status to answer it with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError {
    pub status: u16,
    pub message: String,
}

impl HttpError {
    pub fn new(status: u16, message: impl Into<String>) -> Self {
        HttpError { status, message: message.into() }
    }

    fn bad(message: impl Into<String>) -> Self {
        HttpError::new(400, message)
    }
}

/// One request as the routes see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The path of the request target, without the query string (every admin path is plain
    /// ASCII, so it is not percent-decoded).
    pub path: String,
    pub query: Query,
}

/// Decoded query parameters; each name appears at most once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query(BTreeMap<String, String>);

impl Query {
    /// Parses `a=1&b=x%3A2`. `+` stays `+` (no form encoding). A repeated name is refused:
    /// which one wins would be a guess.
    pub fn parse(raw: &str) -> Result<Query, HttpError> {
        let mut params = BTreeMap::new();
        for pair in raw.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let name = decode(name)?;
            if params.insert(name.clone(), decode(value)?).is_some() {
                return Err(HttpError::bad(format!("query parameter {name:?} given twice")));
            }
        }
        Ok(Query(params))
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    pub fn required(&self, name: &str) -> Result<&str, HttpError> {
        self.get(name).ok_or_else(|| HttpError::bad(format!("missing query parameter {name:?}")))
    }

    /// The `group` parameter: a Raft group number, 0 when absent.
    pub fn group(&self) -> Result<u32, HttpError> {
        match self.get("group") {
            None => Ok(0),
            Some(g) => g.parse().map_err(|_| HttpError::bad(format!("group {g:?} is not a group number"))),
        }
    }

    /// Refuses parameters the endpoint does not know, so a typo is an error, not ignored.
    pub fn allow_only(&self, names: &[&str]) -> Result<(), HttpError> {
        match self.0.keys().find(|k| !names.contains(&k.as_str())) {
            Some(unknown) => Err(HttpError::bad(format!("unknown query parameter {unknown:?}"))),
            None => Ok(()),
        }
    }
}

/// Decodes `%XX` escapes; the result must be UTF-8.
fn decode(s: &str) -> Result<String, HttpError> {
    percent_decode_str(s)
        .decode_utf8()
        .map(|d| d.into_owned())
        .map_err(|_| HttpError::bad(format!("{s:?} does not decode to UTF-8")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_escapes_and_keeps_plus() {
        let q = Query::parse("id=4&raft=10.0.0.4%3A9200&k=a%2Bb+c&flag").expect("valid");
        assert_eq!(q.get("raft"), Some("10.0.0.4:9200"));
        assert_eq!(q.get("k"), Some("a+b+c"));
        assert_eq!(q.get("flag"), Some(""));
        assert_eq!(q.get("missing"), None);
        assert!(Query::parse("").expect("empty").allow_only(&[]).is_ok());
    }

    #[test]
    fn refuses_duplicates_bad_utf8_and_unknown_names() {
        assert_eq!(Query::parse("id=1&id=2").expect_err("twice").status, 400);
        assert_eq!(Query::parse("id=%ff").expect_err("not utf-8").status, 400);
        let q = Query::parse("id=1&flag").expect("valid");
        assert!(q.allow_only(&["id", "flag"]).is_ok());
        assert_eq!(q.allow_only(&["id"]).expect_err("unknown").status, 400);
        assert_eq!(q.required("raft").expect_err("missing").status, 400);
    }
}

//! Just enough HTTP/1.1 for the admin API: read one request head within a byte bound, parse
//! its request line, headers and query string, and encode one JSON response.
//!
//! Parsing is a pure function of the head bytes, so the bounds and the refusals are unit
//! tested without sockets. Every request is answered with `Connection: close`: the admin API
//! serves a handful of calls from scripts and tests, so keep-alive, pipelining and request
//! bodies are deliberately absent (parameters travel in the query string).

use std::collections::BTreeMap;

use tokio::io::{AsyncRead, AsyncReadExt};

/// A request the parser refused, with the HTTP status to answer it with.
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

/// One parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The path of the request target, without the query string (not percent-decoded: every
    /// admin path is plain ASCII).
    pub path: String,
    pub query: Query,
}

/// Decoded query parameters; each name appears at most once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query(BTreeMap<String, String>);

impl Query {
    /// Parses `a=1&b=x%3A2`. A repeated name is refused: which one wins would be a guess.
    pub fn parse(raw: &str) -> Result<Query, HttpError> {
        let mut params = BTreeMap::new();
        for pair in raw.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let name = percent_decode(name)?;
            if params.insert(name.clone(), percent_decode(value)?).is_some() {
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

    /// Refuses parameters the endpoint does not know, so a typo is an error, not ignored.
    pub fn allow_only(&self, names: &[&str]) -> Result<(), HttpError> {
        match self.0.keys().find(|k| !names.contains(&k.as_str())) {
            Some(unknown) => Err(HttpError::bad(format!("unknown query parameter {unknown:?}"))),
            None => Ok(()),
        }
    }
}

/// Decodes `%XX` escapes; the result must be UTF-8. `+` stays `+` (no form encoding).
pub fn percent_decode(s: &str) -> Result<String, HttpError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
            let byte = hex.and_then(|h| u8::from_str_radix(h, 16).ok());
            let byte = byte.ok_or_else(|| HttpError::bad(format!("bad percent escape in {s:?}")))?;
            out.push(byte);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| HttpError::bad(format!("{s:?} does not decode to UTF-8")))
}

/// Index just past the blank line that ends a head, if `buf` holds one.
fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// Reads up to the end of the request head, never buffering more than `head_bytes_max`.
/// `Ok(None)`: the peer closed before sending anything (nothing to answer).
pub async fn read_head<R: AsyncRead + Unpin>(
    reader: &mut R,
    head_bytes_max: usize,
) -> Result<Option<Vec<u8>>, HttpError> {
    let mut buf = vec![0u8; head_bytes_max];
    let mut filled = 0;
    loop {
        if filled == buf.len() {
            return Err(HttpError::new(431, format!("request head exceeds {head_bytes_max} bytes")));
        }
        let n = reader.read(&mut buf[filled..]).await.map_err(|e| HttpError::bad(e.to_string()))?;
        if n == 0 {
            return match filled {
                0 => Ok(None),
                _ => Err(HttpError::bad("connection closed inside the request head")),
            };
        }
        // Only the new bytes and the 3 before them can complete a terminator.
        let scan_from = filled.saturating_sub(3);
        filled += n;
        if let Some(end) = head_end(&buf[scan_from..filled]) {
            buf.truncate(scan_from + end);
            return Ok(Some(buf));
        }
    }
}

fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Parses a complete head (as returned by [`read_head`]). Requests with a body are refused:
/// no endpoint takes one, and not reading it keeps the request bounded.
pub fn parse_head(head: &[u8], headers_max: usize) -> Result<Request, HttpError> {
    let text = std::str::from_utf8(head).map_err(|_| HttpError::bad("request head is not UTF-8"))?;
    let text =
        text.strip_suffix("\r\n\r\n").ok_or_else(|| HttpError::bad("request head is not terminated"))?;
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let request = parse_request_line(request_line)?;
    let mut count = 0;
    for line in lines {
        count += 1;
        if count > headers_max {
            return Err(HttpError::new(431, format!("more than {headers_max} header lines")));
        }
        let (name, value) = parse_header(line)?;
        check_no_body(&name, value)?;
    }
    Ok(request)
}

fn parse_request_line(line: &str) -> Result<Request, HttpError> {
    let parts: Vec<&str> = line.split(' ').collect();
    let [method, target, version] = parts[..] else {
        return Err(HttpError::bad(format!("malformed request line {line:?}")));
    };
    if !is_token(method) {
        return Err(HttpError::bad(format!("malformed method {method:?}")));
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        let status = if version.starts_with("HTTP/") { 505 } else { 400 };
        return Err(HttpError::new(status, format!("unsupported version {version:?}")));
    }
    // Origin form only (RFC 9112 §3.2.1): a path starting with '/', visible ASCII.
    if !target.starts_with('/') || !target.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(HttpError::bad(format!("malformed request target {target:?}")));
    }
    let target = target.split_once('#').map_or(target, |(t, _)| t);
    let (path, raw_query) = target.split_once('?').unwrap_or((target, ""));
    Ok(Request { method: method.to_string(), path: path.to_string(), query: Query::parse(raw_query)? })
}

fn parse_header(line: &str) -> Result<(String, &str), HttpError> {
    // RFC 9112 §5.2: obsolete line folding is refused.
    if line.starts_with([' ', '\t']) {
        return Err(HttpError::bad("folded header lines are not accepted"));
    }
    let (name, value) =
        line.split_once(':').ok_or_else(|| HttpError::bad(format!("malformed header {line:?}")))?;
    if !is_token(name) {
        return Err(HttpError::bad(format!("malformed header name {name:?}")));
    }
    if value.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
        return Err(HttpError::bad(format!("control character in header {name:?}")));
    }
    Ok((name.to_ascii_lowercase(), value.trim_matches([' ', '\t'])))
}

fn check_no_body(name: &str, value: &str) -> Result<(), HttpError> {
    match name {
        "content-length" => match value.parse::<u64>() {
            Ok(0) => Ok(()),
            Ok(_) => Err(HttpError::new(413, "request bodies are not accepted; use the query string")),
            Err(_) => Err(HttpError::bad(format!("malformed content-length {value:?}"))),
        },
        "transfer-encoding" => {
            Err(HttpError::new(413, "request bodies are not accepted; use the query string"))
        }
        _ => Ok(()),
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        421 => "Misdirected Request",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}

/// A complete response: status line, headers, and the JSON body followed by a newline (so
/// `curl` output ends cleanly).
pub fn encode_response(status: u16, body: &serde_json::Value, allow: Option<&str>) -> Vec<u8> {
    let mut body = body.to_string();
    body.push('\n');
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        reason(status),
        body.len()
    );
    if let Some(methods) = allow {
        head.push_str(&format!("Allow: {methods}\r\n"));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;

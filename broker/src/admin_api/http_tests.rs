//! Tests of the admin API's HTTP parsing: accepted forms, bounds, and refusals with the
//! status each one gets. None of them may panic.

use super::*;

fn parse(head: &str) -> Result<Request, HttpError> {
    parse_head(head.as_bytes(), 8)
}

fn status_of(head: &str) -> u16 {
    parse(head).expect_err("must be refused").status
}

#[test]
fn parses_request_line_path_and_query() {
    let req =
        parse("POST /members/add-learner?id=4&raft=10.0.0.4%3A9200&kafka=h:9092 HTTP/1.1\r\nHost: x\r\n\r\n")
            .expect("valid");
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/members/add-learner");
    assert_eq!(req.query.get("id"), Some("4"));
    assert_eq!(req.query.get("raft"), Some("10.0.0.4:9200"));
    assert_eq!(req.query.get("kafka"), Some("h:9092"));
    assert_eq!(req.query.get("missing"), None);
}

#[test]
fn accepts_http_1_0_no_headers_and_zero_content_length() {
    assert_eq!(parse("GET /status HTTP/1.0\r\n\r\n").expect("valid").path, "/status");
    parse("POST /leader/elect HTTP/1.1\r\nContent-Length: 0\r\n\r\n").expect("empty body is fine");
    parse("GET /status? HTTP/1.1\r\n\r\n").expect("empty query");
}

#[test]
fn refuses_malformed_request_lines() {
    assert_eq!(status_of("\r\n\r\n"), 400);
    assert_eq!(status_of("GET\r\n\r\n"), 400);
    assert_eq!(status_of("GET /status\r\n\r\n"), 400);
    assert_eq!(status_of("GET  /status HTTP/1.1\r\n\r\n"), 400);
    assert_eq!(status_of("GET /status HTTP/1.1 extra\r\n\r\n"), 400);
    assert_eq!(status_of("GET status HTTP/1.1\r\n\r\n"), 400);
    assert_eq!(status_of("GET http://h/status HTTP/1.1\r\n\r\n"), 400);
    assert_eq!(status_of("G(T /status HTTP/1.1\r\n\r\n"), 400);
    assert_eq!(status_of("GET /status FTP/1.1\r\n\r\n"), 400);
    assert_eq!(status_of("GET /status HTTP/2.0\r\n\r\n"), 505);
    assert_eq!(status_of("GET /st\u{e9}tus HTTP/1.1\r\n\r\n"), 400);
}

#[test]
fn refuses_bad_headers_and_bodies() {
    assert_eq!(status_of("GET /status HTTP/1.1\r\nNoColon\r\n\r\n"), 400);
    assert_eq!(status_of("GET /status HTTP/1.1\r\nBad Name: x\r\n\r\n"), 400);
    assert_eq!(status_of("GET /status HTTP/1.1\r\nA: b\r\n folded\r\n\r\n"), 400);
    assert_eq!(status_of("GET /status HTTP/1.1\r\nA: b\u{1}c\r\n\r\n"), 400);
    assert_eq!(status_of("POST /leader/elect HTTP/1.1\r\nContent-Length: 5\r\n\r\n"), 413);
    assert_eq!(status_of("POST /leader/elect HTTP/1.1\r\ncontent-length: -1\r\n\r\n"), 400);
    assert_eq!(status_of("POST /leader/elect HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"), 413);
    assert_eq!(status_of("GET /status HTTP/1.1\r\n\r"), 400);
    assert_eq!(parse_head(b"GET /status HTTP/1.1\r\nA: \xff\r\n\r\n", 8).expect_err("not utf-8").status, 400);
}

#[test]
fn bounds_the_number_of_headers() {
    let mut head = "GET /status HTTP/1.1\r\n".to_string();
    for i in 0..8 {
        head.push_str(&format!("H{i}: v\r\n"));
    }
    parse(&format!("{head}\r\n")).expect("8 headers are within the bound");
    head.push_str("H8: v\r\n");
    assert_eq!(status_of(&format!("{head}\r\n")), 431);
}

#[test]
fn query_refuses_duplicates_bad_escapes_and_unknown_names() {
    assert_eq!(status_of("GET /x?id=1&id=2 HTTP/1.1\r\n\r\n"), 400);
    assert_eq!(status_of("GET /x?id=%4 HTTP/1.1\r\n\r\n"), 400);
    assert_eq!(status_of("GET /x?id=%zz HTTP/1.1\r\n\r\n"), 400);
    assert_eq!(status_of("GET /x?id=%ff HTTP/1.1\r\n\r\n"), 400);
    let q = Query::parse("id=1&flag").expect("valid");
    assert_eq!(q.get("flag"), Some(""));
    assert!(q.allow_only(&["id", "flag"]).is_ok());
    assert_eq!(q.allow_only(&["id"]).expect_err("unknown").status, 400);
    assert_eq!(q.required("raft").expect_err("missing").status, 400);
    assert_eq!(percent_decode("a%2Bb+c").expect("valid"), "a+b+c");
}

#[tokio::test]
async fn read_head_stops_at_the_blank_line_and_at_the_bound() {
    let mut input: &[u8] = b"GET /status HTTP/1.1\r\n\r\nleftover";
    let head = read_head(&mut input, 64).await.expect("ok").expect("some");
    assert_eq!(head, b"GET /status HTTP/1.1\r\n\r\n");

    let mut long: &[u8] = &[b'a'; 100];
    assert_eq!(read_head(&mut long, 64).await.expect_err("too long").status, 431);

    let mut empty: &[u8] = b"";
    assert_eq!(read_head(&mut empty, 64).await.expect("ok"), None);

    let mut cut: &[u8] = b"GET /status HTTP/1.1\r\n";
    assert_eq!(read_head(&mut cut, 64).await.expect_err("cut").status, 400);
}

#[tokio::test]
async fn read_head_finds_a_terminator_split_across_reads() {
    let (mut client, mut server) = tokio::io::duplex(64);
    let writer = tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        for part in [&b"GET /status HTTP/1.1\r"[..], b"\n\r", b"\n"] {
            client.write_all(part).await.expect("write");
            tokio::task::yield_now().await;
        }
        client
    });
    let head = read_head(&mut server, 64).await.expect("ok").expect("some");
    assert_eq!(head, b"GET /status HTTP/1.1\r\n\r\n");
    drop(writer.await.expect("writer"));
}

#[test]
fn encodes_a_json_response() {
    let out = encode_response(405, &serde_json::json!({"error": "x"}), Some("GET"));
    let text = String::from_utf8(out).expect("utf-8");
    assert!(text.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"), "{text}");
    assert!(text.contains("Content-Length: 14\r\n"), "{text}");
    assert!(text.contains("Allow: GET\r\n"), "{text}");
    assert!(text.ends_with("\r\n\r\n{\"error\":\"x\"}\n"), "{text}");
}

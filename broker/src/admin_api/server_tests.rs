//! The admin API over TCP: a one-node Raft (leader) with real log and state machine stores,
//! and an uninitialized node (not a leader, not a voter). Each case is one raw HTTP exchange.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use openraft::ServerState;
use raft_store::{LogStore, LogStoreOptions};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::tests::{create, digest_of, produce};
use super::AdminCtx;
use crate::config::BrokerConfig;
use crate::raft::network::Network;
use crate::raft::sm_store;
use crate::raft::transport::auth::Identity;
use crate::raft::transport::transfer::LeaderTransfer;
use crate::raft::transport::vote_gate::{VoteGate, Votes};
use crate::raft::{NodeAddr, Raft};
use onelog_state::command::Command;

const KAFKA: &str = "127.0.0.1:19092";

async fn node(dir: &tempfile::TempDir, id: u64) -> AdminCtx {
    let config = openraft::Config {
        heartbeat_interval: 50,
        election_timeout_min: 150,
        election_timeout_max: 300,
        ..Default::default()
    };
    let config = Arc::new(config.validate().expect("raft config"));
    let log_store =
        LogStore::open(&dir.path().join("raft-log"), LogStoreOptions::default()).expect("log store");
    let log_reader = log_store.reader();
    let broker_config = Arc::new(BrokerConfig::from_overrides(&[]).expect("config"));
    let (state_machine, applied) =
        sm_store::open(dir.path().join("state"), broker_config, None).expect("state machine");
    let transfer = Arc::new(LeaderTransfer::default());
    let network = Network::new(Identity::new(id, None), transfer.clone());
    let raft = Raft::new(id, config, network, log_store, state_machine).await.expect("raft");
    let votes = Arc::new(VoteGate::new(Votes::Open));
    let group = crate::raft::groups::GroupHandle {
        group: 0,
        raft: raft.clone(),
        transfer: transfer.clone(),
        votes: votes.clone(),
        log: log_reader,
        applied: applied.clone(),
        placed: vec![id],
    };
    AdminCtx {
        node_id: id,
        identity: Identity::new(id, None),
        raft,
        transfer,
        applied,
        kafka: KAFKA.to_string(),
        votes,
        serving: Default::default(),
        leader_changes: Default::default(),
        token: None,
        groups: crate::raft::groups::NodeGroups::new(1, vec![group]),
    }
}

/// A one-node cluster that has applied a topic and some produces.
async fn leader(dir: &tempfile::TempDir) -> AdminCtx {
    let ctx = node(dir, 1).await;
    let me = NodeAddr { raft: "127.0.0.1:19093".into(), kafka: KAFKA.into() };
    ctx.raft.initialize(BTreeMap::from([(1, me)])).await.expect("initialize");
    ctx.raft.wait(Some(Duration::from_secs(10))).state(ServerState::Leader, "leader").await.expect("leader");
    for ops in [vec![create("t", 2, 3)], vec![produce("t", 0, 0, 3), produce("t", 1, 0, 1)]] {
        ctx.raft.client_write(Command { stamp: Default::default(), ops }).await.expect("write");
    }
    ctx
}

async fn serve(ctx: AdminCtx) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(super::serve(listener, None, ctx));
    addr
}

/// Sends `raw` as is and reads until the server closes; returns the status, the head and the
/// JSON body (null for the empty body of a request hyper refused before routing).
async fn exchange(addr: SocketAddr, raw: &[u8]) -> (u16, String, Value) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(raw).await.expect("send");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.expect("read");
    let text = String::from_utf8(response).expect("utf-8");
    let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
    let status = head.get(9..12).and_then(|s| s.parse().ok()).expect("status code");
    let body = if body.is_empty() { Value::Null } else { serde_json::from_str(body).expect("json body") };
    (status, head.to_string(), body)
}

async fn call(addr: SocketAddr, method: &str, target: &str) -> (u16, Value) {
    let raw = format!("{method} {target} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    let (status, _, body) = exchange(addr, raw.as_bytes()).await;
    (status, body)
}

#[tokio::test]
async fn status_and_digest_of_a_leader() {
    let dir = tempfile::tempdir().expect("tmp");
    let ctx = leader(&dir).await;
    let addr = serve(ctx.clone()).await;

    let (status, body) = call(addr, "GET", "/status").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["node_id"], 1);
    assert_eq!(body["leader"], 1);
    assert_eq!(body["role"], "leader");
    assert_eq!(body["voters"], json!([1]));
    assert_eq!(body["learners"], json!([]));
    assert_eq!(body["nodes"], json!([{"id": 1, "raft": "127.0.0.1:19093", "kafka": KAFKA}]));
    assert_eq!(body["kafka"], KAFKA);
    assert!(body["term"].as_u64().is_some_and(|t| t >= 1), "{body}");
    assert!(body["last_applied"].as_u64().is_some_and(|i| i >= 3), "{body}");

    let (status, body) = call(addr, "GET", "/digest").await;
    assert_eq!(status, 200, "{body}");
    let expected = serde_json::to_value(digest_of(&ctx.applied)).expect("json");
    assert_eq!(body, expected);
    assert_eq!(body["partitions"][0]["log_end_offset"], 6);
    assert_eq!(body["partitions"][1]["batches"], 1);
    let (status, same) = call(addr, "GET", "/digest?group=0").await;
    assert_eq!((status, &same), (200, &body));
    let (status, body) = call(addr, "GET", "/digest?group=7").await;
    assert_eq!(status, 404, "a group the node does not run: {body}");
    let (status, body) = call(addr, "GET", "/digest?group=x").await;
    assert_eq!(status, 400, "not a group number: {body}");
    ctx.raft.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn membership_requests_on_the_leader_refuse_what_cannot_be_done() {
    let dir = tempfile::tempdir().expect("tmp");
    let ctx = leader(&dir).await;
    let addr = serve(ctx.clone()).await;

    for (method, target, want) in [
        ("POST", "/members/promote?id=9", 409),
        ("POST", "/members/remove?id=9", 404),
        ("POST", "/members/remove?id=1", 409),
        ("POST", "/members/promote", 400),
        ("POST", "/members/promote?id=x", 400),
        ("POST", "/members/promote?id=2&extra=1", 400),
        ("POST", "/members/add-learner?id=2&raft=nohost&kafka=h:1", 400),
        ("POST", "/members/add-learner?id=2&raft=h:99999&kafka=h:1", 400),
        ("POST", "/members/add-learner?id=1&raft=127.0.0.1:1&kafka=h:1", 409),
        ("GET", "/status?verbose=1", 400),
        ("GET", "/nope", 404),
    ] {
        let (status, body) = call(addr, method, target).await;
        assert_eq!(status, want, "{method} {target}: {body}");
        assert!(body["error"].is_string(), "{method} {target}: {body}");
    }
    let (status, body) = call(addr, "POST", "/leader/elect").await;
    assert_eq!((status, &body["triggered"]), (200, &json!(false)), "{body}");
    // Membership is unchanged by all of the above.
    let (_, body) = call(addr, "GET", "/status").await;
    assert_eq!((&body["voters"], &body["role"]), (&json!([1]), &json!("leader")), "{body}");
    ctx.raft.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn malformed_requests_get_their_status_and_never_panic() {
    let dir = tempfile::tempdir().expect("tmp");
    let ctx = node(&dir, 5).await;
    let addr = serve(ctx.clone()).await;
    let (status, head, body) = exchange(addr, b"POST /status HTTP/1.1\r\nConnection: close\r\n\r\n").await;
    assert_eq!(status, 405);
    assert!(head.to_ascii_lowercase().contains("\r\nallow: get"), "{head}");
    assert!(body["error"].is_string(), "{body}");
    let oversized = format!("GET /status HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(10_000));
    for (raw, want) in [
        (b"hello\r\n\r\n".to_vec(), 400),
        // hyper refuses a version it cannot parse as 400 (the hand-written parser said 505).
        (b"GET /status HTTP/2\r\n\r\n".to_vec(), 400),
        (b"POST /leader/elect HTTP/1.1\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello".to_vec(), 413),
        (oversized.into_bytes(), 431),
        (b"\x00\x01\x02\xff\r\n\r\n".to_vec(), 400),
    ] {
        let (status, _, body) = exchange(addr, &raw).await;
        assert_eq!(status, want, "{:?}: {body}", String::from_utf8_lossy(&raw[..raw.len().min(40)]));
    }
    // A client that connects and leaves gets nothing, and the server goes on.
    drop(TcpStream::connect(addr).await.expect("connect"));
    assert_eq!(call(addr, "GET", "/status").await.0, 200);
    ctx.raft.shutdown().await.expect("shutdown");
}

/// Prometheus keeps its scrape connection open: two requests on one connection, the second
/// answered too; `/metrics` is OpenMetrics text naming the node.
#[tokio::test]
async fn metrics_are_served_on_a_kept_alive_connection() {
    let dir = tempfile::tempdir().expect("tmp");
    let ctx = leader(&dir).await;
    let addr = serve(ctx.clone()).await;
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = b"GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n";
    let mut heads = Vec::new();
    for _ in 0..2 {
        stream.write_all(request).await.expect("send");
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            head.push(stream.read_u8().await.expect("read head"));
        }
        let head = String::from_utf8(head).expect("utf-8").to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .and_then(|v| v.trim().parse().ok())
            .expect("content-length");
        let mut body = vec![0; length];
        stream.read_exact(&mut body).await.expect("read body");
        let body = String::from_utf8(body).expect("utf-8");
        assert!(head.starts_with("http/1.1 200"), "{head}");
        assert!(head.contains("content-type: application/openmetrics-text"), "{head}");
        assert!(body.contains("\nonelog_node_id 1\n") && body.ends_with("# EOF\n"), "{body}");
        assert!(body.contains("onelog_partition_high_watermark{topic=\"t\",partition=\"0\"} 6"), "{body}");
        heads.push(head);
    }
    assert_eq!(heads.len(), 2);
    ctx.raft.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_node_that_is_not_the_leader_redirects_membership_changes() {
    let dir = tempfile::tempdir().expect("tmp");
    let ctx = node(&dir, 2).await; // never initialized: knows no leader, is no voter
    let addr = serve(ctx.clone()).await;
    let (status, body) = call(addr, "GET", "/status").await;
    assert_eq!(status, 200);
    assert_eq!(
        (&body["role"], &body["leader"], &body["last_applied"]),
        (&json!("learner"), &Value::Null, &Value::Null)
    );
    for target in
        ["/members/promote?id=1", "/members/remove?id=1", "/members/add-learner?id=3&raft=h:1&kafka=h:2"]
    {
        let (status, body) = call(addr, "POST", target).await;
        assert_eq!(status, 421, "{target}: {body}");
        assert_eq!(body["leader"], Value::Null, "{target}: {body}");
    }
    assert_eq!(call(addr, "POST", "/leader/elect").await.0, 409);
    let (status, body) = call(addr, "GET", "/digest").await;
    assert_eq!((status, &body["partitions"]), (200, &json!([])), "{body}");
    ctx.raft.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn checkpoint_is_taken_on_request_and_shown_in_status() {
    let dir = tempfile::tempdir().expect("tmp");
    let ctx = leader(&dir).await;
    let addr = serve(ctx.clone()).await;
    let (_, before) = call(addr, "GET", "/status").await;
    assert_eq!(before["checkpoint_index"], Value::Null, "{before}");
    let (status, body) = call(addr, "POST", "/checkpoint").await;
    assert_eq!(status, 202, "{body}");
    let covers = body["covers_at_least"].as_u64().expect("an applied index");
    assert_eq!(Some(covers), before["last_applied"].as_u64(), "{body} vs {before}");
    let written = ctx
        .raft
        .wait(Some(Duration::from_secs(10)))
        .metrics(|m| m.snapshot.is_some_and(|s| s.index >= covers), "checkpoint written")
        .await;
    assert!(written.is_ok(), "no checkpoint covering {covers}: {written:?}");
    let (_, after) = call(addr, "GET", "/status").await;
    assert!(after["checkpoint_index"].as_u64() >= Some(covers), "{after}");
    assert_eq!(call(addr, "GET", "/checkpoint").await.0, 405);
    ctx.raft.shutdown().await.expect("shutdown");
}

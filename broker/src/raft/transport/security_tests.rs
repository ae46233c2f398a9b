//! The Raft port against a process that is not a member (issue 15): three in-process nodes
//! sharing a cluster secret, over real TCP, and forged Vote, AppendEntries and TimeoutNow
//! frames sent to the leader without the secret, and with it but breaking the rules. Each is
//! refused by closing the connection, counted (the counters behind the rate-limited log
//! lines), and changes no node's term, leader or log.

use std::collections::BTreeMap;
use std::time::Duration;

use openraft::raft::{AppendEntriesRequest, VoteRequest};
use openraft::Vote;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use super::auth::Identity;
use super::codec::{self, Kind};
use super::handover::TimeoutNow;
use super::tests::{
    assert_closed, leader_of, raft_config, raw_connection_as, start_cluster_with_secret, write, TestNode,
};
use crate::limits;
use crate::raft::TypeConfig;

const SECRET: &[u8] = b"the three nodes' shared cluster secret";
/// What the attacker sent: term 2^64 - 2.
const ABSURD_TERM: u64 = u64::MAX - 1;

/// (term, leader, last log index) of every node.
fn views(nodes: &[TestNode]) -> BTreeMap<u64, (u64, Option<u64>, Option<u64>)> {
    nodes
        .iter()
        .map(|n| {
            let m = n.raft.metrics().borrow().clone();
            (n.id, (m.current_term, m.current_leader, m.last_log_index))
        })
        .collect()
}

fn forged_frames(candidate: u64, term: u64) -> Vec<(&'static str, Vec<u8>)> {
    let max = limits::RAFT_FRAME_BYTES_MAX;
    let vote = VoteRequest::new(Vote::new(term, candidate), None);
    let append = AppendEntriesRequest::<TypeConfig> {
        vote: Vote::new_committed(term, candidate),
        prev_log_id: None,
        leader_commit: None,
        entries: vec![],
    };
    let timeout_now = TimeoutNow { from: candidate, term };
    vec![
        ("Vote", codec::encode(Kind::Vote, 1, &vote, max).expect("encode")),
        ("AppendEntries", codec::encode(Kind::AppendEntries, 2, &append, max).expect("encode")),
        ("TimeoutNow", codec::encode(Kind::TimeoutNow, 3, &timeout_now, max).expect("encode")),
    ]
}

async fn cluster() -> anyhow::Result<(Vec<TestNode>, u64)> {
    let nodes = start_cluster_with_secret(&[1, 2, 3], raft_config(|_| {}), Some(SECRET)).await?;
    let leader = leader_of(&nodes[0], None).await?;
    let leading = nodes.iter().find(|n| n.id == leader).expect("the leader is one of them");
    write(leading, 5).await?;
    // Let every follower apply and the heartbeats settle.
    tokio::time::sleep(Duration::from_millis(300)).await;
    Ok((nodes, leader))
}

async fn shutdown(nodes: Vec<TestNode>) -> anyhow::Result<()> {
    for node in nodes {
        assert!(!node.server.is_finished(), "node {}'s Raft server stopped", node.id);
        node.raft.shutdown().await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_frames_without_the_secret_change_nothing() -> anyhow::Result<()> {
    let (nodes, leader) = cluster().await?;
    let addr = nodes.iter().find(|n| n.id == leader).expect("leader").addr.raft.clone();
    let before = views(&nodes);
    let refused_before = super::server::REFUSED_HANDSHAKES.total();
    let candidate = nodes.iter().map(|n| n.id).find(|id| *id != leader).expect("a follower");

    for (kind, frame) in forged_frames(candidate, ABSURD_TERM) {
        // No handshake at all: the frame is where the Hello should be.
        let mut stream = TcpStream::connect(&addr).await?;
        stream.write_all(&frame).await?;
        assert_closed(stream).await;
        // A handshake as a member, without its secret.
        let outsider = Identity::new(candidate, Some(b"a guess at the cluster secret".as_slice().into()));
        let (mut stream, proven) = raw_connection_as(&addr, leader, &outsider).await?;
        assert!(!proven, "the leader proved a secret the outsider does not hold");
        // The server may already have closed; either way nothing may be answered.
        let _ = stream.write_all(&frame).await;
        assert_closed(stream).await;
        // Without any secret.
        let (mut stream, _) = raw_connection_as(&addr, leader, &Identity::new(candidate, None)).await?;
        let _ = stream.write_all(&frame).await;
        assert_closed(stream).await;
        println!("forged {kind} without the secret: refused");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = views(&nodes);
    assert_eq!(
        before.values().map(|v| v.0).max(),
        after.values().map(|v| v.0).max(),
        "terms moved: {before:?} → {after:?}"
    );
    assert_eq!(before, after, "a forged frame changed a node");
    let refused = super::server::REFUSED_HANDSHAKES.total() - refused_before;
    assert!(refused >= 9, "{refused} handshakes counted as refused, 9 sent");
    shutdown(nodes).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_cannot_send_an_absurd_term_or_speak_for_another_node() -> anyhow::Result<()> {
    let (nodes, leader) = cluster().await?;
    let addr = nodes.iter().find(|n| n.id == leader).expect("leader").addr.raft.clone();
    let before = views(&nodes);
    let refused_before = super::guard::REFUSED.total();
    let member = nodes.iter().map(|n| n.id).find(|id| *id != leader).expect("a follower");
    let other = nodes.iter().map(|n| n.id).find(|id| *id != leader && *id != member).expect("another");
    let sent = [
        // A member's credentials, an absurd term (what made openraft panic).
        (Identity::new(member, Some(SECRET.into())), forged_frames(member, ABSURD_TERM)),
        // A member speaking for another member, at a plausible term.
        (Identity::new(member, Some(SECRET.into())), forged_frames(other, before[&leader].0 + 1)),
        // The secret, but a node id outside the membership.
        (Identity::new(77, Some(SECRET.into())), forged_frames(77, before[&leader].0 + 1)),
    ];
    let mut count = 0;
    for (identity, frames) in sent {
        for (kind, frame) in frames {
            if identity.node_id == 77 && kind == "AppendEntries" {
                // A leader this node's membership does not name may still replicate to it (a
                // node that was down when the leader was added): not refused here.
                continue;
            }
            let (mut stream, proven) = raw_connection_as(&addr, leader, &identity).await?;
            assert!(proven, "the leader's proof");
            stream.write_all(&frame).await?;
            assert_closed(stream).await;
            count += 1;
            println!("{kind} from node {} (authenticated): refused", identity.node_id);
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(before, views(&nodes), "a refused frame changed a node");
    let refused = super::guard::REFUSED.total() - refused_before;
    assert_eq!(refused, count, "{refused} requests counted as refused, {count} sent");
    shutdown(nodes).await
}

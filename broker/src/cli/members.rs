//! `onelog admin add-node | remove-node | transfer-leader`: membership and leadership changes
//! through the leader's admin API (`POST /members/...`, `POST /leader/transfer`).
//!
//! `add-node` is Raft's two steps (§6): add the node as a learner, which answers once it has
//! caught up, then promote it to voter, so a slow new node never holds up the quorum.

use anyhow::Result;
use clap::Args;
use serde_json::{json, Value};

use super::http::AdminApi;
use super::table::{cell, id_list, Report, Table};

/// `add-node`: a node started with `--peers` naming the voters, not yet a member.
#[derive(Debug, Clone, Args)]
pub struct AddNode {
    /// The new node's id.
    pub id: u64,
    /// Its Raft address (`--raft-listen`).
    #[arg(long, value_name = "HOST:PORT")]
    pub raft: String,
    /// Its advertised Kafka address (`--advertised-kafka` or `--kafka-listen`).
    #[arg(long, value_name = "HOST:PORT")]
    pub kafka: String,
    /// Leave it a learner (no promotion).
    #[arg(long)]
    pub learner: bool,
}

fn ids(membership: &Value, field: &str) -> Vec<u64> {
    membership[field].as_array().map(|a| a.iter().filter_map(Value::as_u64).collect()).unwrap_or_default()
}

/// The membership an admin answer carries, as text: voters, learners, and each node's addresses.
fn membership_text(head: &str, membership: &Value) -> String {
    let mut table = Table::new(&["NODE", "RAFT", "KAFKA"]);
    for node in membership["nodes"].as_array().into_iter().flatten() {
        let field = |f: &str| {
            cell(node[f].as_str().map(str::to_string).or_else(|| node[f].as_u64().map(|n| n.to_string())))
        };
        table.row(vec![field("id"), field("raft"), field("kafka")]);
    }
    format!(
        "{head}\nvoters {}; learners {} (membership at log index {})\n\n{}",
        id_list(&ids(membership, "voters")),
        id_list(&ids(membership, "learners")),
        cell(membership["log_index"].as_u64()),
        table.render()
    )
}

/// Query-string value: node addresses are `host:port`, which only `:` of reserved characters.
fn query_value(value: &str) -> String {
    percent_encoding::utf8_percent_encode(value, percent_encoding::NON_ALPHANUMERIC).to_string()
}

pub async fn add_node(admin: &AdminApi, add: &AddNode) -> Result<Report> {
    let path = format!(
        "/members/add-learner?id={}&raft={}&kafka={}",
        add.id,
        query_value(&add.raft),
        query_value(&add.kafka)
    );
    let mut membership = admin.post_to_leader(&path).await?;
    let mut head = format!("node {} added as a learner and caught up", add.id);
    if !add.learner {
        membership = admin.post_to_leader(&format!("/members/promote?id={}", add.id)).await?;
        head = format!("node {} added: caught up as a learner, then made a voter", add.id);
    }
    Ok(Report::new(membership_text(&head, &membership), membership))
}

pub async fn remove_node(admin: &AdminApi, id: u64) -> Result<Report> {
    let membership = admin.post_to_leader(&format!("/members/remove?id={id}")).await?;
    let head = format!("node {id} removed (it shuts itself down)");
    Ok(Report::new(membership_text(&head, &membership), membership))
}

pub async fn transfer_leader(admin: &AdminApi, to: u64, group: u32) -> Result<Report> {
    let answer = admin.post_to_leader(&format!("/leader/transfer?to={to}&group={group}")).await?;
    let leader = answer["leader"].as_u64();
    let term = answer["term"].as_u64();
    let json =
        json!({ "from": answer["node_id"], "leader": leader, "term": term, "asked_for": to, "group": group });
    let of_group = if group == 0 { String::new() } else { format!("group {group}'s ") };
    let mut text = format!(
        "{of_group}leadership moved from node {} to node {} (term {})",
        cell(answer["node_id"].as_u64()),
        cell(leader),
        cell(term)
    );
    if leader != Some(to) {
        text.push_str(&format!("; node {to} was asked for, another up-to-date voter won the election"));
    }
    Ok(Report::new(text, json))
}

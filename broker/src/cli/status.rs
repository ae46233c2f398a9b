//! `onelog admin status`: the leader and term, and every member with its role, addresses and
//! log indexes, from `GET /status` of each `--admin` address that answers.
//!
//! The membership comes from the first node that answers; roles and indexes only from nodes
//! asked (a member whose admin address was not given shows `-`).

use std::collections::BTreeMap;

use anyhow::Result;
use serde_json::{json, Value};

use super::http::AdminApi;
use super::table::{cell, id_list, Report, Table};

fn ids(status: &Value, field: &str) -> Vec<u64> {
    status[field].as_array().map(|a| a.iter().filter_map(Value::as_u64).collect()).unwrap_or_default()
}

/// One member as the report shows it.
fn member(id: u64, first: &Value, seen: &BTreeMap<u64, &Value>) -> Value {
    let node =
        first["nodes"].as_array().and_then(|nodes| nodes.iter().find(|n| n["id"].as_u64() == Some(id)));
    let membership = if ids(first, "learners").contains(&id) { "learner" } else { "voter" };
    let own = seen.get(&id);
    json!({
        "id": id,
        "membership": membership,
        "role": own.map(|s| s["role"].clone()),
        "raft": node.map(|n| n["raft"].clone()),
        "kafka": node.map(|n| n["kafka"].clone()),
        "last_log_index": own.map(|s| s["last_log_index"].clone()),
        "last_applied": own.map(|s| s["last_applied"].clone()),
        // Absent from the status of onelog 0.1.0, which shows as "-".
        "release": own.map(|s| s["release"].clone()),
    })
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// `onelog.version 2, transaction.version 2`, or `-` from a build that does not report them.
fn finalized(levels: &Value) -> String {
    match levels.as_object() {
        Some(levels) if !levels.is_empty() => {
            levels.iter().map(|(name, level)| format!("{name} {level}")).collect::<Vec<_>>().join(", ")
        }
        _ => "-".to_string(),
    }
}

pub async fn status(admin: &AdminApi) -> Result<Report> {
    let (asked, first) = admin.first_status().await?;
    let statuses = admin.all_statuses().await;
    let seen: BTreeMap<u64, &Value> =
        statuses.iter().filter_map(|(_, s)| Some((s["node_id"].as_u64()?, s))).collect();
    let mut members = ids(&first, "voters");
    members.extend(ids(&first, "learners"));
    members.sort_unstable();
    members.dedup();
    let nodes: Vec<Value> = members.iter().map(|&id| member(id, &first, &seen)).collect();
    let json = json!({
        "leader": first["leader"],
        "term": first["term"],
        "asked": asked,
        "voters": ids(&first, "voters"),
        "learners": ids(&first, "learners"),
        "nodes": nodes,
        "features": first["features"]["finalized"],
        "raft_groups": raft_groups(&statuses),
    });
    let mut table =
        Table::new(&["NODE", "MEMBERSHIP", "ROLE", "RAFT", "KAFKA", "LAST LOG INDEX", "APPLIED", "RELEASE"]);
    for node in &nodes {
        let fields =
            ["id", "membership", "role", "raft", "kafka", "last_log_index", "last_applied", "release"];
        table.row(fields.iter().map(|f| cell(text(&node[*f]))).collect());
    }
    let head = format!(
        "leader {}, term {} (as node {} at {asked} sees it)\nvoters {}; learners {}\nfinalized features: {}",
        cell(text(&first["leader"])),
        cell(text(&first["term"])),
        cell(text(&first["node_id"])),
        id_list(&ids(&first, "voters")),
        id_list(&ids(&first, "learners")),
        finalized(&first["features"]["finalized"]),
    );
    let mut report = format!("{head}\n\n{}", table.render());
    if json["raft_groups"].as_array().is_some_and(|g| g.len() > 1) {
        report.push_str(&format!("\n\n{}", groups_table(&json["raft_groups"])));
    }
    Ok(Report::new(report, json))
}

/// Every Raft group any asked node runs, as the node that knows the highest term for it sees
/// it (a node that missed an election reports an older leader): group, leader, term, voters,
/// preferred leader. Empty from a build without groups.
fn raft_groups(statuses: &[(String, Value)]) -> Vec<Value> {
    let mut newest: BTreeMap<u64, &Value> = BTreeMap::new();
    let rows = statuses.iter().filter_map(|(_, s)| s["raft_groups"]["groups"].as_array()).flatten();
    for row in rows {
        let Some(group) = row["group"].as_u64() else { continue };
        let known = newest.get(&group).and_then(|r| r["term"].as_u64());
        if known.is_none_or(|term| row["term"].as_u64() > Some(term)) {
            newest.insert(group, row);
        }
    }
    newest.into_values().cloned().collect()
}

fn groups_table(groups: &Value) -> String {
    let mut table = Table::new(&["GROUP", "LEADER", "TERM", "VOTERS", "PREFERRED LEADER"]);
    for g in groups.as_array().into_iter().flatten() {
        let voters: Vec<u64> =
            g["voters"].as_array().into_iter().flatten().filter_map(Value::as_u64).collect();
        let fields = [&g["group"], &g["leader"], &g["term"]];
        let mut row: Vec<String> = fields.iter().map(|v| cell(text(v))).collect();
        row.push(id_list(&voters));
        row.push(cell(text(&g["preferred_leader"])));
        table.row(row);
    }
    table.render()
}

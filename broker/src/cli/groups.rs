//! `onelog admin groups list | describe`: groups (classic, consumer, Streams, share) from
//! ListGroups and DescribeGroups, and each committed partition's lag (OffsetFetch against
//! ListOffsets' high watermark), as `kafka-consumer-groups.sh --describe` shows it. A share
//! group (KIP-932) commits no offsets (OffsetFetch answers none, as Kafka's does): its lag is
//! in `/metrics` and on the status page.

use std::collections::BTreeMap;

use anyhow::{bail, Result};
use bytes::Buf;
use clap::Subcommand;
use kafka_compat::error_code;
use kafka_compat::isolation_level::READ_UNCOMMITTED;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, DescribeGroupsRequest, GroupId, ListGroupsRequest, OffsetFetchRequest,
};
use kafka_protocol::protocol::Decodable;
use serde_json::{json, Value};

use super::kafka::{check, Kafka};
use super::table::{cell, Report, Table};
use super::topics::{list_offsets, offset_cell, offset_json};

#[derive(Debug, Clone, Subcommand)]
pub enum GroupCommand {
    /// Every group with its state and protocol type.
    List,
    /// State, members, and per partition the committed offset, end offset and lag.
    Describe {
        /// Group ids.
        #[arg(required = true)]
        groups: Vec<String>,
    },
}

pub async fn run(bootstrap: &[String], command: &GroupCommand) -> Result<Report> {
    let mut kafka = Kafka::leader(bootstrap).await?;
    match command {
        GroupCommand::List => list(&mut kafka).await,
        GroupCommand::Describe { groups } => {
            let mut texts = Vec::new();
            let mut described = Vec::new();
            for group in groups {
                let report = describe(&mut kafka, group).await?;
                texts.push(report.text);
                described.push(report.json);
            }
            Ok(Report::new(texts.join("\n\n"), json!({ "groups": described })))
        }
    }
}

/// Every group, by id: ListGroups v5, which names each group's type (classic, consumer,
/// streams, share).
async fn listed(kafka: &mut Kafka) -> Result<Vec<ListedGroup>> {
    let response = kafka.request(5, &ListGroupsRequest::default()).await?;
    check(response.error_code, || "ListGroups".to_string())?;
    let mut groups = response.groups;
    groups.sort_by(|a, b| a.group_id.0.cmp(&b.group_id.0));
    Ok(groups)
}

async fn list(kafka: &mut Kafka) -> Result<Report> {
    let mut table = Table::new(&["GROUP", "TYPE", "STATE", "PROTOCOL TYPE"]);
    let mut json = Vec::new();
    for g in &listed(kafka).await? {
        let (id, group_type) = (g.group_id.0.to_string(), g.group_type.to_string());
        let (state, kind) = (g.group_state.to_string(), g.protocol_type.to_string());
        table.row(vec![id.clone(), group_type.clone(), state.clone(), kind.clone()]);
        json.push(json!({ "group": id, "type": group_type, "state": state, "protocol_type": kind }));
    }
    Ok(Report::new(table.render(), json!({ "groups": json })))
}

/// (topic, partition) → (member id, client id, host) of the member it is assigned to.
type Owners = BTreeMap<(String, i32), (String, String, String)>;

/// Who owns which partition, from the members' consumer-protocol assignments (KIP-429's
/// versioned `ConsumerProtocolAssignment`); an assignment that does not decode owns nothing.
fn owners(group: &DescribedGroup) -> Owners {
    let mut owners = Owners::new();
    for m in &group.members {
        let mut bytes = m.member_assignment.clone();
        if bytes.remaining() < 2 {
            continue;
        }
        let version = bytes.get_i16();
        let Ok(assignment) = ConsumerProtocolAssignment::decode(&mut bytes, version) else { continue };
        for tp in assignment.assigned_partitions {
            for p in tp.partitions {
                let member = (m.member_id.to_string(), m.client_id.to_string(), m.client_host.to_string());
                owners.insert((tp.topic.0.to_string(), p), member);
            }
        }
    }
    owners
}

async fn describe_group(kafka: &mut Kafka, group: &str) -> Result<DescribedGroup> {
    let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(group.to_string().into())]);
    let response = kafka.request(5, &request).await?;
    let Some(described) = response.groups.into_iter().next() else {
        bail!("DescribeGroups answered no group")
    };
    check(described.error_code, || format!("group {group:?}"))?;
    Ok(described)
}

/// (topic, partition) → committed offset, -1 for none; every topic the group committed.
async fn committed(kafka: &mut Kafka, group: &str) -> Result<BTreeMap<(String, i32), i64>> {
    // v2+: topics null asks for every committed partition.
    let request =
        OffsetFetchRequest::default().with_group_id(GroupId(group.to_string().into())).with_topics(None);
    let response = kafka.request(7, &request).await?;
    check(response.error_code, || format!("OffsetFetch of group {group:?}"))?;
    let mut offsets = BTreeMap::new();
    for t in response.topics {
        for p in t.partitions {
            check(p.error_code, || {
                format!("offset of group {group:?} on {}-{}", t.name.0, p.partition_index)
            })?;
            offsets.insert((t.name.0.to_string(), p.partition_index), p.committed_offset);
        }
    }
    Ok(offsets)
}

/// DescribeGroups describes only classic groups, and says a consumer, Streams or share group
/// is Dead: its state and protocol type come from ListGroups instead (its members are not
/// shown).
async fn described_or_listed(kafka: &mut Kafka, group: &str) -> Result<DescribedGroup> {
    let described = describe_group(kafka, group).await?;
    if described.group_state.as_str() != "Dead" {
        return Ok(described);
    }
    let listed = listed(kafka).await?.into_iter().find(|g| g.group_id.0.as_str() == group);
    Ok(match listed {
        Some(g) => described.with_group_state(g.group_state).with_protocol_type(g.protocol_type),
        None => described,
    })
}

async fn describe(kafka: &mut Kafka, group: &str) -> Result<Report> {
    let described = described_or_listed(kafka, group).await?;
    let committed = committed(kafka, group).await?;
    // An unknown group is Dead with no error (DescribeGroups v5 and below); Kafka's admin
    // client reports it as GROUP_ID_NOT_FOUND, and so does this.
    if described.group_state.as_str() == "Dead" && committed.is_empty() {
        bail!("group {group:?}: {} (no such group)", error_code::name(error_code::GROUP_ID_NOT_FOUND));
    }
    let owners = owners(&described);
    let keys: Vec<(String, i32)> = committed.keys().cloned().collect();
    let ends = if keys.is_empty() {
        BTreeMap::new()
    } else {
        list_offsets(kafka, &keys, -1, READ_UNCOMMITTED).await?
    };
    let mut table = Table::new(&["TOPIC", "PARTITION", "COMMITTED", "END", "LAG", "CLIENT ID", "HOST"]);
    let mut partitions = Vec::new();
    for (key, &offset) in &committed {
        let end = ends.get(key);
        let lag = match end {
            Some(Ok(end)) if offset >= 0 => Some((end - offset).max(0)),
            _ => None,
        };
        let owner = owners.get(key);
        let committed_offset = (offset >= 0).then_some(offset);
        table.row(vec![
            key.0.clone(),
            key.1.to_string(),
            cell(committed_offset),
            offset_cell(end),
            cell(lag),
            cell(owner.map(|o| &o.1)),
            cell(owner.map(|o| &o.2)),
        ]);
        partitions.push(json!({
            "topic": key.0, "partition": key.1, "committed_offset": committed_offset,
            "end_offset": offset_json(end), "lag": lag, "member_id": owner.map(|o| &o.0),
        }));
    }
    let members: Vec<Value> = described
        .members
        .iter()
        .map(|m| json!({ "member_id": m.member_id.to_string(), "client_id": m.client_id.to_string(), "host": m.client_host.to_string() }))
        .collect();
    let head = format!(
        "group {group}: state {}, protocol {} {}, {} member(s), total lag {}",
        described.group_state,
        described.protocol_type,
        described.protocol_data,
        members.len(),
        partitions.iter().filter_map(|p| p["lag"].as_i64()).sum::<i64>()
    );
    let json = json!({
        "group": group, "state": described.group_state.to_string(), "protocol_type": described.protocol_type.to_string(),
        "protocol": described.protocol_data.to_string(), "members": members, "partitions": partitions,
    });
    let text = if table.is_empty() {
        format!("{head}\nno committed offsets")
    } else {
        format!("{head}\n\n{}", table.render())
    };
    Ok(Report::new(text, json))
}

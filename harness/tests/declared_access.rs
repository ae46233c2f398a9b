//! The access each API declares on the broker's registry (`handlers::HANDLERS`) is the access
//! it enforces (issue 27): for every API declared to check the cluster, its group or its
//! transactional id, a principal without ACLs gets the declared refusal, the very response
//! the API's `refused` builds, with the authorization error counted; the super user does not.
//! Changing a row to `per_item` or `open` without the handler checking fails here, as does a
//! refusal the pipeline never sends.

use anyhow::{ensure, Context, Result};
use broker::handlers::{Access, Handler, HANDLERS};
use harness::{Cluster, ClusterOptions, RawClient};
use kafka_compat::codec::{decode_response, encode_request};
use kafka_compat::error_code::{
    CLUSTER_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
};
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData};
use kafka_protocol::messages::alter_replica_log_dirs_request::{AlterReplicaLogDir, AlterReplicaLogDirTopic};
use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialDeletion;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::write_txn_markers_request::{WritableTxnMarker, WritableTxnMarkerTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";
const PRINCIPAL_PREFIX: &str = "onelog-test-principal:";
/// The APIs Kafka's `KafkaApis` authorizes on the cluster, the group or the transactional id
/// alone: raise it when a new API declares such a check.
const CHECKED_APIS: usize = 27;

#[tokio::test(flavor = "multi_thread")]
async fn every_checked_api_refuses_a_principal_without_acls() {
    let options = ClusterOptions::new(1)
        .config("authorizer.class.name", STANDARD_AUTHORIZER)
        .config("super.users", "User:admin");
    let mut cluster = Cluster::start_with(options).expect("starting one onelog node");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    let leader = cluster.leader()?;
    let addr = cluster.kafka_addr(leader);
    let mut nobody = RawClient::connect_negotiated(addr).await?;
    let mut admin = RawClient::connect_negotiated(addr).await?;
    let mut checked = 0;
    for handler in HANDLERS {
        let (refused, code) = match handler.access {
            Access::Cluster(_, c) => (c.refused, CLUSTER_AUTHORIZATION_FAILED),
            Access::Group(_, c) => (c.refused, GROUP_AUTHORIZATION_FAILED),
            Access::TransactionalId(_, c) => (c.refused, TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
            Access::PerItem(_) | Access::Open(_) => continue,
        };
        let request = with_one_item(handler);
        let answer = send(&mut nobody, "nobody", handler, &request).await?;
        let expected = refused(&request, code);
        ensure!(
            answer == expected,
            "{:?}: {answer:?}, expected the declared refusal {expected:?}",
            handler.key
        );
        let mut codes = Vec::new();
        (handler.hooks.errors)(&answer, &mut codes);
        ensure!(codes.contains(&code), "{:?}: refusal {answer:?} carries no {code}", handler.key);
        let as_admin = send(&mut admin, "admin", handler, &request).await?;
        ensure!(as_admin != expected, "{:?}: the super user was refused too", handler.key);
        checked += 1;
    }
    // A row that stops declaring its check (per_item, open) lowers the count.
    ensure!(checked == CHECKED_APIS, "{checked} APIs declare a checked resource, not {CHECKED_APIS}");
    write_txn_markers_takes_alter_or_cluster_action(&mut admin, addr).await
}

/// Kafka's WriteTxnMarkers admits ALTER on the cluster, else CLUSTER_ACTION
/// (`KafkaApis.handleWriteTxnMarkersRequest`; `kafka-transactions.sh abort` needs one): a
/// principal with either one is not refused, as the one with neither was above.
async fn write_txn_markers_takes_alter_or_cluster_action(
    admin: &mut RawClient,
    addr: std::net::SocketAddr,
) -> Result<()> {
    // Kafka's `AclOperation` codes.
    const ALTER: i8 = 7;
    const CLUSTER_ACTION: i8 = 9;
    let handler = HANDLERS.iter().find(|h| h.key == ApiKey::WriteTxnMarkers).context("registered")?;
    let request = with_one_item(handler);
    for (principal, operation) in [("alterer", ALTER), ("cluster-actor", CLUSTER_ACTION)] {
        let grant = AclCreation::default()
            .with_resource_type(4) // CLUSTER
            .with_resource_name(StrBytes::from_static_str("kafka-cluster"))
            .with_resource_pattern_type(3) // LITERAL
            .with_principal(StrBytes::from_string(format!("User:{principal}")))
            .with_host(StrBytes::from_static_str("*"))
            .with_operation(operation)
            .with_permission_type(3); // ALLOW
        let create_acls = HANDLERS.iter().find(|h| h.key == ApiKey::CreateAcls).context("registered")?;
        let grant = RequestKind::CreateAcls(CreateAclsRequest::default().with_creations(vec![grant]));
        let created = send(admin, "admin", create_acls, &grant).await?;
        let ResponseKind::CreateAcls(created) = created else { anyhow::bail!("not a CreateAcls answer") };
        ensure!(created.results.iter().all(|r| r.error_code == 0), "granting {principal}: {created:?}");
        let mut client = RawClient::connect_negotiated(addr).await?;
        let answer = send(&mut client, principal, handler, &request).await?;
        let refused = (match handler.access {
            Access::Cluster(_, c) => c.refused,
            _ => anyhow::bail!("WriteTxnMarkers declares the cluster"),
        })(&request, CLUSTER_AUTHORIZATION_FAILED);
        ensure!(answer != refused, "{principal} with operation {operation} was refused: {answer:?}");
    }
    Ok(())
}

/// The API's empty request, with one item where its refusal is per item (an empty request
/// would then be refused with no code at all).
fn with_one_item(handler: &Handler) -> RequestKind {
    let name = || StrBytes::from_static_str("t");
    match (handler.hooks.empty_request)() {
        RequestKind::CreateAcls(r) => RequestKind::CreateAcls(r.with_creations(vec![AclCreation::default()
            .with_resource_type(2)
            .with_resource_name(name())
            .with_resource_pattern_type(3)
            .with_principal(StrBytes::from_static_str("User:x"))
            .with_host(StrBytes::from_static_str("*"))
            .with_operation(3)
            .with_permission_type(3)])),
        RequestKind::DeleteAcls(r) => {
            RequestKind::DeleteAcls(r.with_filters(vec![DeleteAclsFilter::default()
            .with_resource_type_filter(2)
            .with_pattern_type_filter(3)
            .with_operation(3)
            .with_permission_type(3)]))
        }
        RequestKind::AlterUserScramCredentials(r) => RequestKind::AlterUserScramCredentials(
            r.with_deletions(vec![ScramCredentialDeletion::default().with_name(name()).with_mechanism(1)]),
        ),
        RequestKind::AlterClientQuotas(r) => {
            RequestKind::AlterClientQuotas(r.with_entries(vec![EntryData::default().with_entity(vec![
                EntityData::default().with_entity_type(StrBytes::from_static_str("user")),
            ])]))
        }
        RequestKind::AlterReplicaLogDirs(r) => RequestKind::AlterReplicaLogDirs(r.with_dirs(vec![
            AlterReplicaLogDir::default().with_path(name()).with_topics(vec![
                AlterReplicaLogDirTopic::default().with_name(TopicName(name())).with_partitions(vec![0]),
            ]),
        ])),
        RequestKind::WriteTxnMarkers(r) => {
            RequestKind::WriteTxnMarkers(r.with_markers(vec![WritableTxnMarker::default().with_topics(
                vec![
                WritableTxnMarkerTopic::default()
                    .with_name(TopicName(name()))
                    .with_partition_indexes(vec![0]),
            ],
            )]))
        }
        other => other,
    }
}

async fn send(
    client: &mut RawClient,
    principal: &str,
    handler: &Handler,
    body: &RequestKind,
) -> Result<ResponseKind> {
    let version = handler.max_version;
    let client_id = format!("{PRINCIPAL_PREFIX}{principal}");
    let frame = encode_request(handler.key, version, 7, &client_id, body)?;
    client.write_raw(&frame).await?;
    let response = client.read_frame().await.with_context(|| format!("{:?} v{version}", handler.key))?;
    Ok(decode_response(handler.key, version, response)?.1)
}

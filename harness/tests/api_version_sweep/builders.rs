//! One request builder per API key for the version sweep: plausible values (the sweep topic,
//! a group, a transactional id), one element in every array, and only the fields that exist
//! at the version asked (kafka-protocol refuses to encode a field a version lacks).

use bytes::Bytes;
use harness::batch::{encode_batch, TestRecord};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

pub const TOPIC: &str = "sweep";
const GROUP: &str = "sweep-group";
const TXN: &str = "sweep-txn";
const MEMBER: &str = "sweep-member-unknown";
/// A producer id the cluster never allocated: the transactional APIs answer it with an error.
const PRODUCER: i64 = 4_242;

/// What builders need from the live cluster.
pub struct Fixture {
    pub topic_id: uuid::Uuid,
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn topic() -> TopicName {
    TopicName(s(TOPIC))
}

fn group() -> GroupId {
    GroupId(s(GROUP))
}

fn txn() -> TransactionalId {
    TransactionalId(s(TXN))
}

/// The request for `key` at `version`; `None` when the sweep has no builder for the key.
pub fn build(key: ApiKey, v: i16, f: &Fixture) -> Option<RequestKind> {
    Some(match key {
        ApiKey::Produce => RequestKind::Produce(produce(v)),
        ApiKey::Fetch => RequestKind::Fetch(fetch(v, f)),
        ApiKey::ListOffsets => RequestKind::ListOffsets(list_offsets(v)),
        ApiKey::Metadata => RequestKind::Metadata(metadata(v)),
        ApiKey::OffsetCommit => RequestKind::OffsetCommit(offset_commit(v)),
        ApiKey::OffsetFetch => RequestKind::OffsetFetch(offset_fetch(v)),
        ApiKey::FindCoordinator => RequestKind::FindCoordinator(find_coordinator(v)),
        ApiKey::JoinGroup => RequestKind::JoinGroup(join_group(v)),
        ApiKey::Heartbeat => RequestKind::Heartbeat(
            HeartbeatRequest::default()
                .with_group_id(group())
                .with_generation_id(1)
                .with_member_id(s(MEMBER)),
        ),
        ApiKey::LeaveGroup => RequestKind::LeaveGroup(leave_group(v)),
        ApiKey::SyncGroup => RequestKind::SyncGroup(sync_group(v)),
        ApiKey::DescribeGroups => RequestKind::DescribeGroups(
            DescribeGroupsRequest::default()
                .with_groups(vec![group()])
                .with_include_authorized_operations(v >= 3),
        ),
        ApiKey::ListGroups => RequestKind::ListGroups(list_groups(v)),
        ApiKey::ApiVersions => RequestKind::ApiVersions(api_versions(v)),
        ApiKey::CreateTopics => RequestKind::CreateTopics(create_topics(v)),
        ApiKey::DeleteTopics => RequestKind::DeleteTopics(delete_topics(v)),
        ApiKey::InitProducerId => {
            RequestKind::InitProducerId(InitProducerIdRequest::default().with_transaction_timeout_ms(60_000))
        }
        ApiKey::OffsetForLeaderEpoch => RequestKind::OffsetForLeaderEpoch(offset_for_leader_epoch(v)),
        ApiKey::AddPartitionsToTxn => RequestKind::AddPartitionsToTxn(add_partitions_to_txn(v)),
        ApiKey::AddOffsetsToTxn => RequestKind::AddOffsetsToTxn(
            AddOffsetsToTxnRequest::default()
                .with_transactional_id(txn())
                .with_producer_id(ProducerId(PRODUCER))
                .with_group_id(group()),
        ),
        ApiKey::EndTxn => RequestKind::EndTxn(
            EndTxnRequest::default().with_transactional_id(txn()).with_producer_id(ProducerId(PRODUCER)),
        ),
        ApiKey::WriteTxnMarkers => RequestKind::WriteTxnMarkers(write_txn_markers()),
        ApiKey::TxnOffsetCommit => RequestKind::TxnOffsetCommit(txn_offset_commit(v)),
        ApiKey::DescribeConfigs => RequestKind::DescribeConfigs(describe_configs(v)),
        ApiKey::CreatePartitions => RequestKind::CreatePartitions(create_partitions()),
        ApiKey::DeleteGroups => RequestKind::DeleteGroups(
            DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("sweep-no-such-group"))]),
        ),
        ApiKey::OffsetDelete => RequestKind::OffsetDelete(offset_delete()),
        ApiKey::DescribeCluster => RequestKind::DescribeCluster(
            DescribeClusterRequest::default()
                .with_include_cluster_authorized_operations(true)
                .with_endpoint_type(1),
        ),
        ApiKey::DescribeProducers => RequestKind::DescribeProducers(describe_producers()),
        ApiKey::DescribeTransactions => RequestKind::DescribeTransactions(
            DescribeTransactionsRequest::default().with_transactional_ids(vec![txn()]),
        ),
        ApiKey::ListTransactions => RequestKind::ListTransactions(list_transactions(v)),
        ApiKey::ConsumerGroupHeartbeat => RequestKind::ConsumerGroupHeartbeat(
            ConsumerGroupHeartbeatRequest::default().with_group_id(group()).with_member_id(s(MEMBER)),
        ),
        _ => return build_admin(key, v, f),
    })
}

/// The admin APIs beyond the classic set (new handlers add theirs here).
fn build_admin(key: ApiKey, v: i16, f: &Fixture) -> Option<RequestKind> {
    let _ = v;
    Some(match key {
        // On the sweep's PLAINTEXT listener both answer ILLEGAL_SASL_STATE, as Kafka's do.
        ApiKey::SaslHandshake => {
            RequestKind::SaslHandshake(SaslHandshakeRequest::default().with_mechanism(s("PLAIN")))
        }
        ApiKey::SaslAuthenticate => {
            RequestKind::SaslAuthenticate(SaslAuthenticateRequest::default().with_auth_bytes(Bytes::new()))
        }
        ApiKey::ConsumerGroupDescribe => RequestKind::ConsumerGroupDescribe(
            ConsumerGroupDescribeRequest::default()
                .with_group_ids(vec![group()])
                .with_include_authorized_operations(true),
        ),
        // A heartbeat of a member the group does not know: answered, never a closed connection.
        ApiKey::StreamsGroupHeartbeat => RequestKind::StreamsGroupHeartbeat(
            StreamsGroupHeartbeatRequest::default()
                .with_group_id(group())
                .with_member_id(s(MEMBER))
                .with_member_epoch(1),
        ),
        ApiKey::StreamsGroupDescribe => RequestKind::StreamsGroupDescribe(
            StreamsGroupDescribeRequest::default()
                .with_group_ids(vec![group()])
                .with_include_authorized_operations(true)
                .with_include_topology_description(v >= 1),
        ),
        _ => return build_share(key, v, f),
    })
}

/// The share-group APIs (KIP-932): a member the group does not know, the sweep topic, no
/// share session: each answered with an error, never a closed connection.
fn build_share(key: ApiKey, v: i16, f: &Fixture) -> Option<RequestKind> {
    let member = Some(s(MEMBER));
    Some(match key {
        ApiKey::ShareGroupHeartbeat => RequestKind::ShareGroupHeartbeat(
            ShareGroupHeartbeatRequest::default()
                .with_group_id(group())
                .with_member_id(s(MEMBER))
                .with_member_epoch(1),
        ),
        ApiKey::ShareGroupDescribe => RequestKind::ShareGroupDescribe(
            ShareGroupDescribeRequest::default()
                .with_group_ids(vec![group()])
                .with_include_authorized_operations(true),
        ),
        ApiKey::ShareFetch => RequestKind::ShareFetch(
            ShareFetchRequest::default()
                .with_group_id(Some(group()))
                .with_member_id(member)
                .with_share_session_epoch(5)
                .with_topics(vec![share_fetch_request::FetchTopic::default()
                    .with_topic_id(f.topic_id)
                    .with_partitions(vec![share_fetch_request::FetchPartition::default()])]),
        ),
        ApiKey::ShareAcknowledge => RequestKind::ShareAcknowledge(
            ShareAcknowledgeRequest::default()
                .with_group_id(Some(group()))
                .with_member_id(member)
                .with_share_session_epoch(5),
        ),
        ApiKey::DescribeShareGroupOffsets => RequestKind::DescribeShareGroupOffsets(
            DescribeShareGroupOffsetsRequest::default().with_groups(vec![
                describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup::default()
                    .with_group_id(group())
                    .with_topics(None),
            ]),
        ),
        ApiKey::AlterShareGroupOffsets => RequestKind::AlterShareGroupOffsets(
            AlterShareGroupOffsetsRequest::default().with_group_id(group()).with_topics(vec![
                alter_share_group_offsets_request::AlterShareGroupOffsetsRequestTopic::default()
                    .with_topic_name(topic())
                    .with_partitions(vec![
                        alter_share_group_offsets_request::AlterShareGroupOffsetsRequestPartition::default(),
                    ]),
            ]),
        ),
        ApiKey::DeleteShareGroupOffsets => RequestKind::DeleteShareGroupOffsets(
            DeleteShareGroupOffsetsRequest::default().with_group_id(group()).with_topics(vec![
                delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic::default()
                    .with_topic_name(topic()),
            ]),
        ),
        _ => return build_cluster(key, v, f),
    })
}

/// The cluster and broker admin APIs.
fn build_cluster(key: ApiKey, v: i16, f: &Fixture) -> Option<RequestKind> {
    Some(match key {
        ApiKey::DescribeLogDirs => {
            RequestKind::DescribeLogDirs(DescribeLogDirsRequest::default().with_topics(Some(vec![
                describe_log_dirs_request::DescribableLogDirTopic::default()
                    .with_topic(topic())
                    .with_partitions(vec![0]),
            ])))
        }
        ApiKey::DescribeQuorum => RequestKind::DescribeQuorum(DescribeQuorumRequest::default().with_topics(
            vec![describe_quorum_request::TopicData::default()
                .with_topic_name(TopicName(s("__cluster_metadata")))
                .with_partitions(vec![
                    describe_quorum_request::PartitionData::default().with_partition_index(0)
                ])],
        )),
        ApiKey::ElectLeaders => {
            let request =
                ElectLeadersRequest::default().with_timeout_ms(10_000).with_topic_partitions(Some(vec![
                    elect_leaders_request::TopicPartitions::default()
                        .with_topic(topic())
                        .with_partitions(vec![0]),
                ]));
            RequestKind::ElectLeaders(if v >= 1 { request.with_election_type(0) } else { request })
        }
        ApiKey::DescribeTopicPartitions => RequestKind::DescribeTopicPartitions(
            DescribeTopicPartitionsRequest::default()
                .with_topics(vec![
                    describe_topic_partitions_request::TopicRequest::default().with_name(topic())
                ])
                .with_response_partition_limit(2_000)
                .with_cursor(Some(
                    describe_topic_partitions_request::Cursor::default()
                        .with_topic_name(topic())
                        .with_partition_index(0),
                )),
        ),
        ApiKey::GetTelemetrySubscriptions => {
            RequestKind::GetTelemetrySubscriptions(GetTelemetrySubscriptionsRequest::default())
        }
        ApiKey::PushTelemetry => RequestKind::PushTelemetry(
            PushTelemetryRequest::default().with_client_instance_id(f.topic_id).with_metrics(Bytes::new()),
        ),
        ApiKey::DescribeAcls => RequestKind::DescribeAcls(
            DescribeAclsRequest::default()
                .with_resource_type_filter(ANY)
                .with_pattern_type_filter(ANY)
                .with_operation(ANY)
                .with_permission_type(ANY),
        ),
        ApiKey::CreateAcls => RequestKind::CreateAcls(CreateAclsRequest::default().with_creations(vec![
            create_acls_request::AclCreation::default()
                .with_resource_type(RESOURCE_TOPIC)
                .with_resource_name(s(TOPIC))
                .with_resource_pattern_type(PATTERN_LITERAL)
                .with_principal(s("User:alice"))
                .with_host(s("*"))
                .with_operation(OPERATION_READ)
                .with_permission_type(PERMISSION_ALLOW),
        ])),
        ApiKey::DeleteAcls => RequestKind::DeleteAcls(DeleteAclsRequest::default().with_filters(vec![
            delete_acls_request::DeleteAclsFilter::default()
                .with_resource_type_filter(ANY)
                .with_pattern_type_filter(ANY)
                .with_operation(ANY)
                .with_permission_type(ANY),
        ])),
        ApiKey::DescribeUserScramCredentials => RequestKind::DescribeUserScramCredentials(
            DescribeUserScramCredentialsRequest::default().with_users(Some(vec![
                describe_user_scram_credentials_request::UserName::default().with_name(s("alice")),
            ])),
        ),
        ApiKey::AlterUserScramCredentials => RequestKind::AlterUserScramCredentials(
            AlterUserScramCredentialsRequest::default()
                .with_deletions(vec![alter_user_scram_credentials_request::ScramCredentialDeletion::default(
                )
                .with_name(s("bob"))
                .with_mechanism(SCRAM_SHA_256)])
                .with_upsertions(vec![
                    alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
                        .with_name(s("alice"))
                        .with_mechanism(SCRAM_SHA_256)
                        .with_iterations(4_096)
                        .with_salt(Bytes::from_static(b"salt"))
                        .with_salted_password(Bytes::from_static(b"salted")),
                ]),
        ),
        ApiKey::ListPartitionReassignments => RequestKind::ListPartitionReassignments(
            ListPartitionReassignmentsRequest::default().with_timeout_ms(1_000).with_topics(Some(vec![
                list_partition_reassignments_request::ListPartitionReassignmentsTopics::default()
                    .with_name(topic())
                    .with_partition_indexes(vec![0]),
            ])),
        ),
        ApiKey::AlterPartitionReassignments => RequestKind::AlterPartitionReassignments(
            AlterPartitionReassignmentsRequest::default().with_timeout_ms(1_000).with_topics(vec![
                alter_partition_reassignments_request::ReassignableTopic::default()
                    .with_name(topic())
                    .with_partitions(vec![
                        alter_partition_reassignments_request::ReassignablePartition::default()
                            .with_partition_index(0)
                            .with_replicas(Some(vec![BrokerId(1)])),
                    ]),
            ]),
        ),
        ApiKey::AlterReplicaLogDirs => {
            RequestKind::AlterReplicaLogDirs(AlterReplicaLogDirsRequest::default().with_dirs(vec![
                alter_replica_log_dirs_request::AlterReplicaLogDir::default()
                    .with_path(s("/tmp/elsewhere"))
                    .with_topics(vec![alter_replica_log_dirs_request::AlterReplicaLogDirTopic::default()
                        .with_name(topic())
                        .with_partitions(vec![0])]),
            ]))
        }
        ApiKey::CreateDelegationToken => {
            let request = CreateDelegationTokenRequest::default()
                .with_renewers(vec![create_delegation_token_request::CreatableRenewers::default()
                    .with_principal_type(s("User"))
                    .with_principal_name(s("bob"))])
                .with_max_lifetime_ms(-1);
            RequestKind::CreateDelegationToken(if v >= 3 {
                request.with_owner_principal_type(Some(s("User"))).with_owner_principal_name(Some(s("alice")))
            } else {
                request
            })
        }
        ApiKey::RenewDelegationToken => RequestKind::RenewDelegationToken(
            RenewDelegationTokenRequest::default()
                .with_hmac(Bytes::from_static(b"hmac"))
                .with_renew_period_ms(1_000),
        ),
        ApiKey::ExpireDelegationToken => RequestKind::ExpireDelegationToken(
            ExpireDelegationTokenRequest::default()
                .with_hmac(Bytes::from_static(b"hmac"))
                .with_expiry_time_period_ms(1_000),
        ),
        ApiKey::DescribeDelegationToken => RequestKind::DescribeDelegationToken(
            DescribeDelegationTokenRequest::default().with_owners(Some(vec![
                describe_delegation_token_request::DescribeDelegationTokenOwner::default()
                    .with_principal_type(s("User"))
                    .with_principal_name(s("alice")),
            ])),
        ),
        ApiKey::UpdateFeatures => {
            let update = update_features_request::FeatureUpdateKey::default()
                .with_feature(s("transaction.version"))
                .with_max_version_level(1);
            let update =
                if v >= 1 { update.with_upgrade_type(1) } else { update.with_allow_downgrade(false) };
            let request =
                UpdateFeaturesRequest::default().with_timeout_ms(1_000).with_feature_updates(vec![update]);
            RequestKind::UpdateFeatures(if v >= 1 { request.with_validate_only(true) } else { request })
        }
        ApiKey::UnregisterBroker => {
            RequestKind::UnregisterBroker(UnregisterBrokerRequest::default().with_broker_id(BrokerId(9)))
        }
        ApiKey::AddRaftVoter => RequestKind::AddRaftVoter(
            AddRaftVoterRequest::default().with_voter_id(9).with_timeout_ms(1_000).with_listeners(vec![
                add_raft_voter_request::Listener::default()
                    .with_name(s("PLAINTEXT"))
                    .with_host(s("127.0.0.1"))
                    .with_port(9),
            ]),
        ),
        ApiKey::ListConfigResources => RequestKind::ListConfigResources(if v >= 1 {
            ListConfigResourcesRequest::default().with_resource_types(vec![RESOURCE_TOPIC])
        } else {
            ListConfigResourcesRequest::default()
        }),
        ApiKey::RemoveRaftVoter => {
            RequestKind::RemoveRaftVoter(RemoveRaftVoterRequest::default().with_voter_id(9))
        }
        _ => return build_changes(key, v),
    })
}

/// ACL filter "any", and one concrete binding (Kafka's `AclOperation`/`ResourceType` codes).
const ANY: i8 = 1;
const RESOURCE_TOPIC: i8 = 2;
const PATTERN_LITERAL: i8 = 3;
const OPERATION_READ: i8 = 3;
const PERMISSION_ALLOW: i8 = 3;
const SCRAM_SHA_256: i8 = 1;

fn produce(v: i16) -> ProduceRequest {
    let records = encode_batch(&[TestRecord::new(b"k".to_vec(), b"v".to_vec(), 1_700_000_000_000)])
        .expect("a test batch encodes");
    let _ = v;
    ProduceRequest::default().with_acks(-1).with_timeout_ms(10_000).with_topic_data(vec![
        produce_request::TopicProduceData::default().with_name(topic()).with_partition_data(vec![
            produce_request::PartitionProduceData::default().with_index(0).with_records(Some(records)),
        ]),
    ])
}

fn fetch(v: i16, f: &Fixture) -> FetchRequest {
    let mut partition = fetch_request::FetchPartition::default()
        .with_partition(0)
        .with_fetch_offset(0)
        .with_partition_max_bytes(1 << 20);
    if v >= 9 {
        partition = partition.with_current_leader_epoch(-1);
    }
    if v >= 5 {
        partition = partition.with_log_start_offset(-1);
    }
    let mut t = fetch_request::FetchTopic::default().with_partitions(vec![partition]);
    t = if v >= 13 { t.with_topic_id(f.topic_id) } else { t.with_topic(topic()) };
    let mut request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(10)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_isolation_level(1)
        .with_topics(vec![t]);
    if v >= 7 {
        request = request.with_forgotten_topics_data(vec![fetch_request::ForgottenTopic::default()
            .with_topic(if v >= 13 { TopicName::default() } else { topic() })
            .with_topic_id(if v >= 13 { f.topic_id } else { uuid::Uuid::nil() })
            .with_partitions(vec![0])]);
    }
    if v >= 15 {
        request = request.with_replica_id(BrokerId(-1));
    }
    request
}

fn list_offsets(v: i16) -> ListOffsetsRequest {
    let mut partition =
        list_offsets_request::ListOffsetsPartition::default().with_partition_index(0).with_timestamp(-1);
    if v >= 4 {
        partition = partition.with_current_leader_epoch(-1);
    }
    let mut request = ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![
        list_offsets_request::ListOffsetsTopic::default().with_name(topic()).with_partitions(vec![partition]),
    ]);
    if v >= 2 {
        request = request.with_isolation_level(1);
    }
    if v >= 10 {
        request = request.with_timeout_ms(1_000);
    }
    request
}

fn metadata(v: i16) -> MetadataRequest {
    let mut request = MetadataRequest::default()
        .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default().with_name(Some(topic()))]));
    if v >= 4 {
        request = request.with_allow_auto_topic_creation(false);
    }
    if (8..=10).contains(&v) {
        request = request.with_include_cluster_authorized_operations(true);
    }
    if v >= 8 {
        request = request.with_include_topic_authorized_operations(true);
    }
    request
}

fn offset_commit(v: i16) -> OffsetCommitRequest {
    let mut partition = offset_commit_request::OffsetCommitRequestPartition::default()
        .with_partition_index(0)
        .with_committed_offset(0);
    if v >= 6 {
        partition = partition.with_committed_leader_epoch(-1);
    }
    let mut request = OffsetCommitRequest::default()
        .with_group_id(group())
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![offset_commit_request::OffsetCommitRequestTopic::default()
            .with_name(topic())
            .with_partitions(vec![partition.with_committed_metadata(Some(s("")))])]);
    if (2..=4).contains(&v) {
        request = request.with_retention_time_ms(-1);
    }
    request
}

fn offset_fetch(v: i16) -> OffsetFetchRequest {
    if v >= 8 {
        return OffsetFetchRequest::default().with_require_stable(true).with_groups(vec![
            offset_fetch_request::OffsetFetchRequestGroup::default().with_group_id(group()).with_topics(
                Some(vec![offset_fetch_request::OffsetFetchRequestTopics::default()
                    .with_name(topic())
                    .with_partition_indexes(vec![0])]),
            ),
        ]);
    }
    let request = OffsetFetchRequest::default().with_group_id(group()).with_topics(Some(vec![
        offset_fetch_request::OffsetFetchRequestTopic::default()
            .with_name(topic())
            .with_partition_indexes(vec![0]),
    ]));
    if v >= 7 {
        request.with_require_stable(true)
    } else {
        request
    }
}

fn find_coordinator(v: i16) -> FindCoordinatorRequest {
    if v >= 4 {
        return FindCoordinatorRequest::default().with_key_type(0).with_coordinator_keys(vec![s(GROUP)]);
    }
    let request = FindCoordinatorRequest::default().with_key(s(GROUP));
    if v >= 1 {
        request.with_key_type(0)
    } else {
        request
    }
}

fn join_group(v: i16) -> JoinGroupRequest {
    let mut request = JoinGroupRequest::default()
        .with_group_id(group())
        .with_session_timeout_ms(10_000)
        .with_member_id(s(MEMBER))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(Bytes::from_static(&[0, 1, 0, 0, 0, 0, 0, 0, 0, 0]))]);
    if v >= 1 {
        request = request.with_rebalance_timeout_ms(10_000);
    }
    if v >= 8 {
        request = request.with_reason(Some(s("sweep")));
    }
    request
}

fn leave_group(v: i16) -> LeaveGroupRequest {
    let request = LeaveGroupRequest::default().with_group_id(group());
    if v >= 3 {
        let mut member = leave_group_request::MemberIdentity::default().with_member_id(s(MEMBER));
        if v >= 5 {
            member = member.with_reason(Some(s("sweep")));
        }
        request.with_members(vec![member])
    } else {
        request.with_member_id(s(MEMBER))
    }
}

fn sync_group(v: i16) -> SyncGroupRequest {
    let mut request = SyncGroupRequest::default()
        .with_group_id(group())
        .with_generation_id(1)
        .with_member_id(s(MEMBER))
        .with_assignments(vec![sync_group_request::SyncGroupRequestAssignment::default()
            .with_member_id(s(MEMBER))
            .with_assignment(Bytes::from_static(&[0, 1, 0, 0, 0, 0, 0, 0, 0, 0]))]);
    if v >= 5 {
        request = request.with_protocol_type(Some(s("consumer"))).with_protocol_name(Some(s("range")));
    }
    request
}

fn list_groups(v: i16) -> ListGroupsRequest {
    let mut request = ListGroupsRequest::default();
    if v >= 4 {
        request = request.with_states_filter(vec![s("Empty")]);
    }
    if v >= 5 {
        request = request.with_types_filter(vec![s("classic")]);
    }
    request
}

fn api_versions(v: i16) -> ApiVersionsRequest {
    let request = ApiVersionsRequest::default();
    if v >= 3 {
        request.with_client_software_name(s("onelog-sweep")).with_client_software_version(s("1.0"))
    } else {
        request
    }
}

fn create_topics(v: i16) -> CreateTopicsRequest {
    // The sweep topic exists: TOPIC_ALREADY_EXISTS, and validate_only changes nothing anyway.
    let mut request = CreateTopicsRequest::default().with_timeout_ms(10_000).with_topics(vec![
        create_topics_request::CreatableTopic::default()
            .with_name(topic())
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_configs(vec![create_topics_request::CreatableTopicConfig::default()
                .with_name(s("cleanup.policy"))
                .with_value(Some(s("delete")))]),
    ]);
    if v >= 1 {
        request = request.with_validate_only(true);
    }
    request
}

fn delete_topics(v: i16) -> DeleteTopicsRequest {
    let request = DeleteTopicsRequest::default().with_timeout_ms(10_000);
    if v >= 6 {
        request.with_topics(vec![delete_topics_request::DeleteTopicState::default()
            .with_name(Some(TopicName(s("sweep-no-such-topic"))))])
    } else {
        request.with_topic_names(vec![TopicName(s("sweep-no-such-topic"))])
    }
}

fn offset_for_leader_epoch(v: i16) -> OffsetForLeaderEpochRequest {
    let mut partition = offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
        .with_partition(0)
        .with_leader_epoch(1);
    if v >= 2 {
        partition = partition.with_current_leader_epoch(-1);
    }
    let request = OffsetForLeaderEpochRequest::default().with_topics(vec![
        offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
            .with_topic(topic())
            .with_partitions(vec![partition]),
    ]);
    if v >= 3 {
        request.with_replica_id(BrokerId(-1))
    } else {
        request
    }
}

fn add_partitions_to_txn(v: i16) -> AddPartitionsToTxnRequest {
    let topics = vec![add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
        .with_name(topic())
        .with_partitions(vec![0])];
    if v >= 4 {
        return AddPartitionsToTxnRequest::default().with_transactions(vec![
            add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
                .with_transactional_id(txn())
                .with_producer_id(ProducerId(PRODUCER))
                .with_topics(topics),
        ]);
    }
    AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn())
        .with_v3_and_below_producer_id(ProducerId(PRODUCER))
        .with_v3_and_below_topics(topics)
}

fn write_txn_markers() -> WriteTxnMarkersRequest {
    WriteTxnMarkersRequest::default().with_markers(vec![
        write_txn_markers_request::WritableTxnMarker::default()
            .with_producer_id(ProducerId(PRODUCER))
            .with_transaction_result(false)
            .with_topics(vec![write_txn_markers_request::WritableTxnMarkerTopic::default()
                .with_name(topic())
                .with_partition_indexes(vec![0])]),
    ])
}

fn txn_offset_commit(v: i16) -> TxnOffsetCommitRequest {
    let mut partition = txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
        .with_partition_index(0)
        .with_committed_offset(0)
        .with_committed_metadata(Some(s("")));
    if v >= 2 {
        partition = partition.with_committed_leader_epoch(-1);
    }
    let mut request = TxnOffsetCommitRequest::default()
        .with_transactional_id(txn())
        .with_group_id(group())
        .with_producer_id(ProducerId(PRODUCER))
        .with_topics(vec![txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
            .with_name(topic())
            .with_partitions(vec![partition])]);
    if v >= 3 {
        request = request.with_generation_id_or_member_epoch(-1).with_member_id(s(""));
    }
    request
}

fn describe_configs(v: i16) -> DescribeConfigsRequest {
    let request = DescribeConfigsRequest::default().with_resources(vec![
        describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(RESOURCE_TOPIC)
            .with_resource_name(s(TOPIC))
            .with_configuration_keys(Some(vec![s("cleanup.policy")])),
    ]);
    let request = if v >= 1 { request.with_include_synonyms(true) } else { request };
    if v >= 3 {
        request.with_include_documentation(true)
    } else {
        request
    }
}

fn create_partitions() -> CreatePartitionsRequest {
    CreatePartitionsRequest::default().with_timeout_ms(10_000).with_validate_only(true).with_topics(vec![
        create_partitions_request::CreatePartitionsTopic::default()
            .with_name(topic())
            .with_count(2)
            .with_assignments(Some(vec![create_partitions_request::CreatePartitionsAssignment::default()
                .with_broker_ids(vec![BrokerId(1)])])),
    ])
}

fn offset_delete() -> OffsetDeleteRequest {
    OffsetDeleteRequest::default().with_group_id(GroupId(s("sweep-no-such-group"))).with_topics(vec![
        offset_delete_request::OffsetDeleteRequestTopic::default().with_name(topic()).with_partitions(vec![
            offset_delete_request::OffsetDeleteRequestPartition::default().with_partition_index(0),
        ]),
    ])
}

fn describe_producers() -> DescribeProducersRequest {
    DescribeProducersRequest::default().with_topics(vec![describe_producers_request::TopicRequest::default()
        .with_name(topic())
        .with_partition_indexes(vec![0])])
}

fn list_transactions(v: i16) -> ListTransactionsRequest {
    let request = ListTransactionsRequest::default()
        .with_state_filters(vec![s("Ongoing")])
        .with_producer_id_filters(vec![ProducerId(PRODUCER)]);
    if v >= 1 {
        request.with_duration_filter(1_000)
    } else {
        request
    }
}

/// The APIs that change configs, records and quotas: each a harmless change (validate_only
/// where the API has it, a DeleteRecords to the log start).
fn build_changes(key: ApiKey, v: i16) -> Option<RequestKind> {
    let _ = v;
    Some(match key {
        ApiKey::AlterConfigs => RequestKind::AlterConfigs(
            AlterConfigsRequest::default().with_validate_only(true).with_resources(vec![
                alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(RESOURCE_TOPIC)
                    .with_resource_name(s(TOPIC))
                    .with_configs(vec![alter_configs_request::AlterableConfig::default()
                        .with_name(s("retention.ms"))
                        .with_value(Some(s("60000")))]),
            ]),
        ),
        ApiKey::IncrementalAlterConfigs => RequestKind::IncrementalAlterConfigs(
            IncrementalAlterConfigsRequest::default().with_validate_only(true).with_resources(vec![
                incremental_alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(RESOURCE_TOPIC)
                    .with_resource_name(s(TOPIC))
                    .with_configs(vec![incremental_alter_configs_request::AlterableConfig::default()
                        .with_name(s("retention.ms"))
                        .with_config_operation(0)
                        .with_value(Some(s("60000")))]),
            ]),
        ),
        ApiKey::DeleteRecords => RequestKind::DeleteRecords(
            DeleteRecordsRequest::default().with_timeout_ms(10_000).with_topics(vec![
                delete_records_request::DeleteRecordsTopic::default().with_name(topic()).with_partitions(
                    vec![delete_records_request::DeleteRecordsPartition::default()
                        .with_partition_index(0)
                        .with_offset(0)],
                ),
            ]),
        ),
        ApiKey::DescribeClientQuotas => {
            RequestKind::DescribeClientQuotas(DescribeClientQuotasRequest::default().with_components(vec![
                describe_client_quotas_request::ComponentData::default()
                    .with_entity_type(s("client-id"))
                    .with_match_type(2),
            ]))
        }
        ApiKey::AlterClientQuotas => RequestKind::AlterClientQuotas(
            AlterClientQuotasRequest::default().with_validate_only(true).with_entries(vec![
                alter_client_quotas_request::EntryData::default()
                    .with_entity(vec![alter_client_quotas_request::EntityData::default()
                        .with_entity_type(s("client-id"))
                        .with_entity_name(Some(s("sweep-client")))])
                    .with_ops(vec![alter_client_quotas_request::OpData::default()
                        .with_key(s("producer_byte_rate"))
                        .with_value(1024.0)]),
            ]),
        ),
        _ => return None,
    })
}

//! The error codes a Kafka response carries, for `onelog_kafka_request_errors_total`: one
//! walker per API, named after its handler module, that adds the top-level code and each code
//! per partition, topic, group, transaction or resource. The registry (`handlers::HANDLERS`)
//! wires each API to its walker, so an API cannot go uncounted.

use kafka_protocol::messages::*;

/// Where a walker puts the non-zero codes it finds.
pub struct Codes<'a>(pub &'a mut Vec<i16>);

impl Codes<'_> {
    pub fn add(&mut self, code: i16) {
        if code != 0 {
            self.0.push(code);
        }
    }
}

/// Walkers of responses whose only error code is the top-level one.
macro_rules! top_level {
    ($($walker:ident: $response:ty),* $(,)?) => {
        $(pub fn $walker(r: &$response, c: &mut Codes) {
            c.add(r.error_code);
        })*
    };
}

top_level!(
    add_offsets_to_txn: AddOffsetsToTxnResponse,
    add_raft_voter: AddRaftVoterResponse,
    api_versions: ApiVersionsResponse,
    consumer_group_heartbeat: ConsumerGroupHeartbeatResponse,
    create_delegation_token: CreateDelegationTokenResponse,
    describe_acls: DescribeAclsResponse,
    describe_client_quotas: DescribeClientQuotasResponse,
    describe_cluster: DescribeClusterResponse,
    describe_delegation_token: DescribeDelegationTokenResponse,
    end_txn: EndTxnResponse,
    expire_delegation_token: ExpireDelegationTokenResponse,
    get_telemetry_subscriptions: GetTelemetrySubscriptionsResponse,
    heartbeat: HeartbeatResponse,
    init_producer_id: InitProducerIdResponse,
    join_group: JoinGroupResponse,
    list_config_resources: ListConfigResourcesResponse,
    list_groups: ListGroupsResponse,
    list_partition_reassignments: ListPartitionReassignmentsResponse,
    list_transactions: ListTransactionsResponse,
    push_telemetry: PushTelemetryResponse,
    remove_raft_voter: RemoveRaftVoterResponse,
    renew_delegation_token: RenewDelegationTokenResponse,
    sasl_authenticate: SaslAuthenticateResponse,
    sasl_handshake: SaslHandshakeResponse,
    share_group_heartbeat: ShareGroupHeartbeatResponse,
    streams_group_heartbeat: StreamsGroupHeartbeatResponse,
    sync_group: SyncGroupResponse,
    unregister_broker: UnregisterBrokerResponse,
);

pub fn produce(r: &ProduceResponse, c: &mut Codes) {
    r.responses.iter().flat_map(|t| &t.partition_responses).for_each(|p| c.add(p.error_code));
}

pub fn fetch(r: &FetchResponse, c: &mut Codes) {
    c.add(r.error_code);
    r.responses.iter().flat_map(|t| &t.partitions).for_each(|p| c.add(p.error_code));
}

pub fn list_offsets(r: &ListOffsetsResponse, c: &mut Codes) {
    r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| c.add(p.error_code));
}

pub fn metadata(r: &MetadataResponse, c: &mut Codes) {
    r.topics.iter().for_each(|t| c.add(t.error_code));
}

pub fn offset_commit(r: &OffsetCommitResponse, c: &mut Codes) {
    r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| c.add(p.error_code));
}

pub fn txn_offset_commit(r: &TxnOffsetCommitResponse, c: &mut Codes) {
    r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| c.add(p.error_code));
}

pub fn offset_fetch(r: &OffsetFetchResponse, c: &mut Codes) {
    c.add(r.error_code);
    r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| c.add(p.error_code));
    for g in &r.groups {
        c.add(g.error_code);
        g.topics.iter().flat_map(|t| &t.partitions).for_each(|p| c.add(p.error_code));
    }
}

pub fn add_partitions_to_txn(r: &AddPartitionsToTxnResponse, c: &mut Codes) {
    c.add(r.error_code);
    let v3 = r.results_by_topic_v3_and_below.iter().flat_map(|t| &t.results_by_partition);
    v3.for_each(|p| c.add(p.partition_error_code));
    for txn in &r.results_by_transaction {
        let v4 = txn.topic_results.iter().flat_map(|t| &t.results_by_partition);
        v4.for_each(|p| c.add(p.partition_error_code));
    }
}

pub fn find_coordinator(r: &FindCoordinatorResponse, c: &mut Codes) {
    c.add(r.error_code);
    r.coordinators.iter().for_each(|k| c.add(k.error_code));
}

pub fn create_topics(r: &CreateTopicsResponse, c: &mut Codes) {
    r.topics.iter().for_each(|t| c.add(t.error_code));
}

pub fn delete_topics(r: &DeleteTopicsResponse, c: &mut Codes) {
    r.responses.iter().for_each(|t| c.add(t.error_code));
}

pub fn leave_group(r: &LeaveGroupResponse, c: &mut Codes) {
    c.add(r.error_code);
    r.members.iter().for_each(|m| c.add(m.error_code));
}

pub fn describe_groups(r: &DescribeGroupsResponse, c: &mut Codes) {
    r.groups.iter().for_each(|g| c.add(g.error_code));
}

pub fn consumer_group_describe(r: &ConsumerGroupDescribeResponse, c: &mut Codes) {
    r.groups.iter().for_each(|g| c.add(g.error_code));
}

pub fn streams_group_describe(r: &StreamsGroupDescribeResponse, c: &mut Codes) {
    r.groups.iter().for_each(|g| c.add(g.error_code));
}

pub fn share_group_describe(r: &ShareGroupDescribeResponse, c: &mut Codes) {
    r.groups.iter().for_each(|g| c.add(g.error_code));
}

/// The top-level code, then each partition's fetch and acknowledgement codes.
pub fn share_fetch(r: &ShareFetchResponse, c: &mut Codes) {
    c.add(r.error_code);
    for p in r.responses.iter().flat_map(|t| &t.partitions) {
        c.add(p.error_code);
        c.add(p.acknowledge_error_code);
    }
}

pub fn describe_share_group_offsets(r: &DescribeShareGroupOffsetsResponse, c: &mut Codes) {
    for g in &r.groups {
        c.add(g.error_code);
        g.topics.iter().flat_map(|t| &t.partitions).for_each(|p| c.add(p.error_code));
    }
}

pub fn alter_share_group_offsets(r: &AlterShareGroupOffsetsResponse, c: &mut Codes) {
    c.add(r.error_code);
    r.responses.iter().flat_map(|t| &t.partitions).for_each(|p| c.add(p.error_code));
}

pub fn delete_share_group_offsets(r: &DeleteShareGroupOffsetsResponse, c: &mut Codes) {
    c.add(r.error_code);
    r.responses.iter().for_each(|t| c.add(t.error_code));
}

pub fn share_acknowledge(r: &ShareAcknowledgeResponse, c: &mut Codes) {
    c.add(r.error_code);
    r.responses.iter().flat_map(|t| &t.partitions).for_each(|p| c.add(p.error_code));
}

pub fn delete_groups(r: &DeleteGroupsResponse, c: &mut Codes) {
    r.results.iter().for_each(|g| c.add(g.error_code));
}

pub fn offset_delete(r: &OffsetDeleteResponse, c: &mut Codes) {
    c.add(r.error_code);
    r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| c.add(p.error_code));
}

pub fn create_partitions(r: &CreatePartitionsResponse, c: &mut Codes) {
    r.results.iter().for_each(|t| c.add(t.error_code));
}

pub fn delete_records(r: &DeleteRecordsResponse, c: &mut Codes) {
    r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| c.add(p.error_code));
}

pub fn describe_configs(r: &DescribeConfigsResponse, c: &mut Codes) {
    r.results.iter().for_each(|x| c.add(x.error_code));
}

pub fn alter_configs(r: &AlterConfigsResponse, c: &mut Codes) {
    r.responses.iter().for_each(|x| c.add(x.error_code));
}

pub fn incremental_alter_configs(r: &IncrementalAlterConfigsResponse, c: &mut Codes) {
    r.responses.iter().for_each(|x| c.add(x.error_code));
}

pub fn describe_transactions(r: &DescribeTransactionsResponse, c: &mut Codes) {
    r.transaction_states.iter().for_each(|t| c.add(t.error_code));
}

pub fn describe_producers(r: &DescribeProducersResponse, c: &mut Codes) {
    r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| c.add(p.error_code));
}

pub fn offset_for_leader_epoch(r: &OffsetForLeaderEpochResponse, c: &mut Codes) {
    r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| c.add(p.error_code));
}

pub fn describe_topic_partitions(r: &DescribeTopicPartitionsResponse, c: &mut Codes) {
    for t in &r.topics {
        c.add(t.error_code);
        t.partitions.iter().for_each(|p| c.add(p.error_code));
    }
}

pub fn describe_quorum(r: &DescribeQuorumResponse, c: &mut Codes) {
    c.add(r.error_code);
    r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| c.add(p.error_code));
}

pub fn describe_log_dirs(r: &DescribeLogDirsResponse, c: &mut Codes) {
    c.add(r.error_code);
    r.results.iter().for_each(|d| c.add(d.error_code));
}

pub fn elect_leaders(r: &ElectLeadersResponse, c: &mut Codes) {
    c.add(r.error_code);
    let partitions = r.replica_election_results.iter().flat_map(|t| &t.partition_result);
    partitions.for_each(|p| c.add(p.error_code));
}

pub fn create_acls(r: &CreateAclsResponse, c: &mut Codes) {
    r.results.iter().for_each(|x| c.add(x.error_code));
}

pub fn delete_acls(r: &DeleteAclsResponse, c: &mut Codes) {
    r.filter_results.iter().for_each(|x| c.add(x.error_code));
}

pub fn describe_user_scram_credentials(r: &DescribeUserScramCredentialsResponse, c: &mut Codes) {
    c.add(r.error_code);
    r.results.iter().for_each(|x| c.add(x.error_code));
}

pub fn alter_user_scram_credentials(r: &AlterUserScramCredentialsResponse, c: &mut Codes) {
    r.results.iter().for_each(|x| c.add(x.error_code));
}

pub fn alter_client_quotas(r: &AlterClientQuotasResponse, c: &mut Codes) {
    r.entries.iter().for_each(|x| c.add(x.error_code));
}

pub fn update_features(r: &UpdateFeaturesResponse, c: &mut Codes) {
    c.add(r.error_code);
    r.results.iter().for_each(|x| c.add(x.error_code));
}

pub fn alter_partition_reassignments(r: &AlterPartitionReassignmentsResponse, c: &mut Codes) {
    c.add(r.error_code);
    r.responses.iter().flat_map(|t| &t.partitions).for_each(|p| c.add(p.error_code));
}

pub fn alter_replica_log_dirs(r: &AlterReplicaLogDirsResponse, c: &mut Codes) {
    r.results.iter().flat_map(|t| &t.partitions).for_each(|p| c.add(p.error_code));
}

pub fn write_txn_markers(r: &WriteTxnMarkersResponse, c: &mut Codes) {
    let topics = r.markers.iter().flat_map(|m| &m.topics);
    topics.flat_map(|t| &t.partitions).for_each(|p| c.add(p.error_code));
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};

    #[test]
    fn counts_each_partition_error_and_no_success() {
        let partition = |code| PartitionProduceResponse::default().with_error_code(code);
        let topic = TopicProduceResponse::default().with_partition_responses(vec![
            partition(0),
            partition(6),
            partition(6),
            partition(87),
        ]);
        let mut codes = Vec::new();
        produce(&ProduceResponse::default().with_responses(vec![topic]), &mut Codes(&mut codes));
        assert_eq!(codes, vec![6, 6, 87]);
        let mut codes = Vec::new();
        end_txn(&EndTxnResponse::default(), &mut Codes(&mut codes));
        assert_eq!(codes, Vec::<i16>::new());
        end_txn(&EndTxnResponse::default().with_error_code(47), &mut Codes(&mut codes));
        assert_eq!(codes, vec![47]);
    }
}

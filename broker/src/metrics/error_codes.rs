//! The error codes a Kafka response carries, for `onelog_kafka_request_errors_total`: the
//! top-level code and, for the APIs that answer per partition (or per group, transaction or
//! topic), each of those. APIs not listed are counted by their top-level code only, or not at
//! all when they have none.

use kafka_protocol::messages::ResponseKind;

/// Every non-zero error code in `body`, once per occurrence.
pub fn of(body: &ResponseKind) -> Vec<i16> {
    let mut codes = Vec::new();
    let mut add = |code: i16| {
        if code != 0 {
            codes.push(code);
        }
    };
    match body {
        ResponseKind::Produce(r) => {
            r.responses.iter().flat_map(|t| &t.partition_responses).for_each(|p| add(p.error_code))
        }
        ResponseKind::Fetch(r) => {
            add(r.error_code);
            r.responses.iter().flat_map(|t| &t.partitions).for_each(|p| add(p.error_code));
        }
        ResponseKind::ListOffsets(r) => {
            r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| add(p.error_code))
        }
        ResponseKind::Metadata(r) => r.topics.iter().for_each(|t| add(t.error_code)),
        ResponseKind::OffsetCommit(r) => {
            r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| add(p.error_code))
        }
        ResponseKind::TxnOffsetCommit(r) => {
            r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| add(p.error_code))
        }
        ResponseKind::OffsetFetch(r) => {
            add(r.error_code);
            r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| add(p.error_code));
            r.groups.iter().for_each(|g| add(g.error_code));
        }
        ResponseKind::AddPartitionsToTxn(r) => {
            add(r.error_code);
            r.results_by_topic_v3_and_below
                .iter()
                .flat_map(|t| &t.results_by_partition)
                .for_each(|p| add(p.partition_error_code));
            r.results_by_transaction.iter().for_each(|txn| {
                txn.topic_results
                    .iter()
                    .flat_map(|t| &t.results_by_partition)
                    .for_each(|p| add(p.partition_error_code));
            });
        }
        ResponseKind::FindCoordinator(r) => {
            add(r.error_code);
            r.coordinators.iter().for_each(|c| add(c.error_code));
        }
        ResponseKind::CreateTopics(r) => r.topics.iter().for_each(|t| add(t.error_code)),
        ResponseKind::DeleteTopics(r) => r.responses.iter().for_each(|t| add(t.error_code)),
        ResponseKind::InitProducerId(r) => add(r.error_code),
        ResponseKind::EndTxn(r) => add(r.error_code),
        ResponseKind::AddOffsetsToTxn(r) => add(r.error_code),
        ResponseKind::JoinGroup(r) => add(r.error_code),
        ResponseKind::SyncGroup(r) => add(r.error_code),
        ResponseKind::Heartbeat(r) => add(r.error_code),
        ResponseKind::LeaveGroup(r) => {
            add(r.error_code);
            r.members.iter().for_each(|m| add(m.error_code));
        }
        ResponseKind::DescribeGroups(r) => r.groups.iter().for_each(|g| add(g.error_code)),
        ResponseKind::ListGroups(r) => add(r.error_code),
        ResponseKind::DeleteGroups(r) => r.results.iter().for_each(|g| add(g.error_code)),
        ResponseKind::ApiVersions(r) => add(r.error_code),
        ResponseKind::DescribeCluster(r) => add(r.error_code),
        ResponseKind::CreatePartitions(r) => r.results.iter().for_each(|t| add(t.error_code)),
        ResponseKind::DeleteRecords(r) => {
            r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| add(p.error_code))
        }
        ResponseKind::DescribeConfigs(r) => r.results.iter().for_each(|c| add(c.error_code)),
        ResponseKind::DescribeTransactions(r) => r.transaction_states.iter().for_each(|t| add(t.error_code)),
        ResponseKind::ListTransactions(r) => add(r.error_code),
        ResponseKind::OffsetForLeaderEpoch(r) => {
            r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| add(p.error_code))
        }
        _ => {}
    }
    codes
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
    use kafka_protocol::messages::{EndTxnResponse, ProduceResponse};

    #[test]
    fn counts_each_partition_error_and_no_success() {
        let partition = |code| PartitionProduceResponse::default().with_error_code(code);
        let topic = TopicProduceResponse::default().with_partition_responses(vec![
            partition(0),
            partition(6),
            partition(6),
            partition(87),
        ]);
        let body = ResponseKind::Produce(ProduceResponse::default().with_responses(vec![topic]));
        assert_eq!(of(&body), vec![6, 6, 87]);
        assert_eq!(of(&ResponseKind::EndTxn(EndTxnResponse::default())), Vec::<i16>::new());
        assert_eq!(of(&ResponseKind::EndTxn(EndTxnResponse::default().with_error_code(47))), vec![47]);
    }
}

//! The request quota (`request_percentage`), as Kafka's `ClientRequestQuotaManager` meters it:
//! the time a principal's (and client id's) requests keep the broker's threads busy, as a
//! percentage of one thread per second. onelog has no request-handler pool: what it meters is
//! the time the runtime's threads spend polling a request's handler ([`Timed`]), which is the
//! CPU the request costs (a produce waiting for its Raft commit costs nothing while it waits).
//!
//! Over the quota, the response carries the throttle time (in `throttle_time_ms`, every
//! response type that has the field) and the connection reads nothing more for that long, as
//! Kafka mutes a throttled channel; older clients that do not wait themselves are held back by
//! the mute alone.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use kafka_protocol::messages::{ApiKey, ResponseKind};

/// Kafka's `NanosToPercentagePerSecond`: a nanosecond of thread time, in percent-seconds.
pub const NANOS_TO_PERCENT: f64 = 100.0 / 1e9;

/// APIs the request quota never throttles, as Kafka exempts them: a client must always be able
/// to learn versions and authenticate.
pub fn exempt(key: ApiKey) -> bool {
    matches!(key, ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate)
}

/// A future that adds the time spent in its `poll` to a shared counter, in nanoseconds.
pub struct Timed<F> {
    inner: Pin<Box<F>>,
    busy_nanos: Arc<AtomicU64>,
}

impl<F: Future> Timed<F> {
    pub fn new(inner: F, busy_nanos: Arc<AtomicU64>) -> Self {
        Timed { inner: Box::pin(inner), busy_nanos }
    }
}

impl<F: Future> Future for Timed<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let started = Instant::now();
        let polled = self.inner.as_mut().poll(cx);
        let nanos = started.elapsed().as_nanos().min(u64::MAX as u128) as u64;
        self.busy_nanos.fetch_add(nanos, Ordering::Relaxed);
        polled
    }
}

/// Writes `throttle_ms` into the response's `throttle_time_ms` when it is larger than what the
/// handler put there (a byte-rate throttle); Kafka answers the larger of the two.
pub fn raise_throttle(body: &mut ResponseKind, throttle_ms: i32) {
    macro_rules! raise {
        ($($kind:ident),* $(,)?) => {
            match body {
                $(ResponseKind::$kind(r) => r.throttle_time_ms = r.throttle_time_ms.max(throttle_ms),)*
                _ => {}
            }
        };
    }
    raise!(
        AddOffsetsToTxn,
        AddPartitionsToTxn,
        AlterClientQuotas,
        AlterConfigs,
        AlterPartitionReassignments,
        AlterReplicaLogDirs,
        AlterUserScramCredentials,
        ConsumerGroupDescribe,
        ConsumerGroupHeartbeat,
        CreateAcls,
        CreateDelegationToken,
        CreatePartitions,
        CreateTopics,
        DeleteAcls,
        DeleteGroups,
        DeleteRecords,
        DeleteTopics,
        DescribeAcls,
        DescribeClientQuotas,
        DescribeCluster,
        DescribeConfigs,
        DescribeDelegationToken,
        DescribeGroups,
        DescribeLogDirs,
        DescribeProducers,
        DescribeTopicPartitions,
        DescribeTransactions,
        DescribeUserScramCredentials,
        ElectLeaders,
        EndTxn,
        ExpireDelegationToken,
        Fetch,
        FindCoordinator,
        GetTelemetrySubscriptions,
        Heartbeat,
        IncrementalAlterConfigs,
        InitProducerId,
        JoinGroup,
        LeaveGroup,
        ListGroups,
        ListOffsets,
        ListPartitionReassignments,
        ListTransactions,
        Metadata,
        OffsetCommit,
        OffsetDelete,
        OffsetFetch,
        OffsetForLeaderEpoch,
        Produce,
        PushTelemetry,
        RenewDelegationToken,
        SyncGroup,
        TxnOffsetCommit,
        UpdateFeatures,
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{MetadataResponse, ProduceResponse};

    #[tokio::test]
    async fn timed_counts_the_time_spent_polling_not_waiting() {
        let busy = Arc::new(AtomicU64::new(0));
        Timed::new(
            async {
                // 200 ms asleep: not polled meanwhile, so not counted.
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                let spin = Instant::now();
                while spin.elapsed() < std::time::Duration::from_millis(5) {}
            },
            busy.clone(),
        )
        .await;
        let ms = busy.load(Ordering::Relaxed) as f64 / 1e6;
        assert!((5.0..150.0).contains(&ms), "polled for {ms} ms");
    }

    #[test]
    fn the_larger_throttle_wins() {
        let mut produce = ResponseKind::Produce(ProduceResponse::default().with_throttle_time_ms(300));
        raise_throttle(&mut produce, 100);
        let ResponseKind::Produce(r) = &produce else { unreachable!() };
        assert_eq!(r.throttle_time_ms, 300);
        let mut metadata = ResponseKind::Metadata(MetadataResponse::default());
        raise_throttle(&mut metadata, 100);
        let ResponseKind::Metadata(r) = &metadata else { unreachable!() };
        assert_eq!(r.throttle_time_ms, 100);
    }
}

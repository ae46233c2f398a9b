//! What the broker knows about each Kafka API besides its handler, declared on the API's row of
//! the registry (`handlers::HANDLERS`): who may call it ([`Access`]), which node serves it
//! ([`Route`]), and how its response is throttled and its error codes counted ([`Hooks`]). The
//! request pipeline (`pipeline`) reads these and nothing else, so an API added to the
//! registry cannot be silently unauthorized, unthrottled or uncounted: every field is required.

use kafka_protocol::messages::{RequestKind, ResponseKind};
use onelog_state::BrokerState;

/// Who may call an API, as Kafka's `KafkaApis` checks it.
#[derive(Clone, Copy)]
pub enum Access {
    /// Any of the operations on the cluster resource (one for every API but WriteTxnMarkers,
    /// which Kafka allows with ALTER, else CLUSTER_ACTION). Checked by the pipeline before the
    /// handler runs; refused with CLUSTER_AUTHORIZATION_FAILED in the API's own shape
    /// (`Checked::refused`).
    Cluster(&'static [i8], Checked),
    /// The operation on the request's group (`Checked::name`), refused with
    /// GROUP_AUTHORIZATION_FAILED by the pipeline.
    Group(i8, Checked),
    /// The operation on the request's transactional id (`Checked::name`), refused with
    /// TRANSACTIONAL_ID_AUTHORIZATION_FAILED by the pipeline.
    TransactionalId(i8, Checked),
    /// The handler checks each topic, partition, group or id the request names (Kafka answers
    /// each item on its own); the text says which operations.
    PerItem(&'static str),
    /// No authorization; the text says why (Kafka checks none either, or the API only ever
    /// answers an error).
    Open(&'static str),
}

/// What the pipeline needs to check a single resource and to refuse the whole request.
#[derive(Clone, Copy)]
pub struct Checked {
    /// The checked resource's name in the request (a group id, a transactional id); unused for
    /// the cluster, whose name is fixed.
    pub name: fn(&RequestKind) -> Option<&str>,
    /// The response that refuses the whole request with `code`, every item it names carrying
    /// the code where the API answers per item (Kafka's `getErrorResponse`).
    pub refused: fn(&RequestKind, i16) -> ResponseKind,
}

/// Which node serves an API.
#[derive(Clone, Copy)]
pub enum Route {
    /// Any node answers from its applied state, or with the API's own "not the leader" error
    /// (NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR) that sends the client to the leader.
    AnyNode,
    /// Only the leader can put it in the log; a follower forwards the requests `when` selects
    /// to the leader over the Raft transport (Kafka's KIP-590 envelope) and answers once its
    /// own applied state is `settled` by the leader's answer. Forwarded once, at dispatch: the
    /// leader serves a forwarded request itself. When the leader cannot be asked, the
    /// follower's own handler answers (with NOT_CONTROLLER or the API's retriable error).
    Leader(Forwarded),
}

#[derive(Clone, Copy)]
pub struct Forwarded {
    pub when: fn(&RequestKind) -> bool,
    pub settled: fn(&RequestKind, &ResponseKind, &BrokerState) -> bool,
}

/// The response hooks of an API, generated from its response type on its registry row.
#[derive(Clone, Copy)]
pub struct Hooks {
    /// The response's `throttle_time_ms`: raised to a quota's throttle (Kafka answers the
    /// larger of a byte-rate and a request-time throttle), and read back to mute the
    /// connection. `None`: the response has no such field (the connection is still muted).
    pub throttle: Option<ThrottleField>,
    /// From this request version on the client waits out `throttle_time_ms` itself (KIP-219,
    /// Kafka's `shouldClientThrottle`); to older versions the response is held back instead.
    pub client_waits_from: i16,
    /// Whether the request quota (`request_percentage`) meters this API; Kafka exempts those a
    /// client needs to learn versions and authenticate.
    pub request_quota: bool,
    /// Adds every non-zero error code of the response (top level and per item) to the vector,
    /// for `onelog_kafka_request_errors_total`; false when the response is not of this API.
    pub errors: fn(&ResponseKind, &mut Vec<i16>) -> bool,
    /// An empty response of this API, for the registry's tests.
    pub empty: fn() -> ResponseKind,
    /// An empty request of this API, for the tests of declared access.
    pub empty_request: fn() -> RequestKind,
}

/// Read and raise one response type's `throttle_time_ms`.
#[derive(Clone, Copy)]
pub struct ThrottleField {
    /// Raises the field to at least `ms`; false when the response is not of this API.
    pub raise: fn(&mut ResponseKind, i32) -> bool,
    pub of: fn(&ResponseKind) -> i32,
}

/// Kafka's `shouldClientThrottle` is false at every version: the response is held back.
pub const NEVER: i16 = i16::MAX;

impl Hooks {
    /// The throttle the response asks of its connection (0 when it has no field).
    pub fn throttle_ms(&self, body: &ResponseKind) -> i32 {
        self.throttle.map_or(0, |t| (t.of)(body))
    }

    /// Raises the response's throttle to at least `ms`.
    pub fn raise_throttle(&self, body: &mut ResponseKind, ms: i32) {
        if let Some(t) = self.throttle {
            (t.raise)(body, ms);
        }
    }

    /// The response's non-zero error codes.
    pub fn error_codes(&self, body: &ResponseKind) -> Vec<i16> {
        let mut codes = Vec::new();
        (self.errors)(body, &mut codes);
        codes
    }
}

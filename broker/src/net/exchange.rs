//! What a listener and the request pipeline (`pipeline`) hand each other: the
//! frame with who sent it, and the reply to write. The listener knows connections and
//! bytes; the pipeline knows APIs. The node passes the pipeline to the listeners as a
//! [`Dispatch`] function, so the network layer never imports the handlers above it.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use kafka_compat::principal::KafkaPrincipal;
use tokio::task::JoinHandle;

use super::framing::Reservation;
use crate::ctx::SharedCtx;

/// A request's frame as read from its connection, and who sent it.
pub struct Incoming {
    pub frame: Bytes,
    /// The frame's request memory, released when the response is written.
    pub memory: Reservation,
    pub sender: Sender,
}

/// Who sent a connection's requests.
pub struct Sender {
    pub ip: IpAddr,
    pub listener: Arc<str>,
    pub principal: Arc<KafkaPrincipal>,
    /// `Request::connection_id`.
    pub connection: u64,
}

/// What the writer sends back for one request: the encoded response (`None` for a produce
/// with acks=0) and the throttle it asks for.
pub struct Reply {
    pub bytes: Option<Bytes>,
    pub throttle_ms: i32,
    /// The client does not wait out the throttle itself (pre-KIP-219 versions): the response
    /// is held back for the throttle time instead.
    pub hold_response: bool,
}

impl Reply {
    pub fn unthrottled(bytes: Option<Bytes>) -> Self {
        Reply { bytes, throttle_ms: 0, hold_response: false }
    }

    /// How long the writer holds this response back: the throttle, for a version whose client
    /// does not wait it out itself, and only if there is one. Regression (issue 31): an
    /// unthrottled response of such a version (AddPartitionsToTxn v0, FindCoordinator v0–v1,
    /// what librdkafka sends) waited in a zero-length `tokio::time::sleep`, which still parks
    /// until the timer's next 1 ms tick: 1.1 ms of librdkafka's 4.4 ms transaction.
    pub fn hold(&self) -> Option<std::time::Duration> {
        (self.hold_response && self.throttle_ms > 0)
            .then(|| std::time::Duration::from_millis(self.throttle_ms as u64))
    }
}

/// A reply being computed; the connection's writer awaits them in request order.
pub type Pending = JoinHandle<anyhow::Result<Reply>>;

/// Why the pipeline closes the connection instead of answering.
pub enum Refused {
    /// The frame is not a request this broker serves (unknown key, version, undecodable).
    Malformed(String),
    /// An ordered handler's first stage failed.
    Failed(String),
}

pub type Dispatched = Pin<Box<dyn Future<Output = Result<Pending, Refused>> + Send>>;

/// The request pipeline: called in the connection's read loop, in request order. It returns
/// once the request is submitted (an ordered handler's first stage has run), with the reply
/// still being computed.
pub type Dispatch = fn(SharedCtx, Incoming) -> Dispatched;

/// Called once a client connection closed, with its id (`Sender::connection`): what the
/// connection held beyond its requests (share sessions) ends with it.
pub type Closed = fn(&SharedCtx, u64);

#[cfg(test)]
mod tests {
    use super::Reply;
    use std::time::Duration;

    /// Only a throttled response of a version whose client does not wait is held, and for
    /// exactly its throttle; an unthrottled one goes out at once.
    #[test]
    fn only_a_throttled_response_of_an_old_version_is_held() {
        let reply = |throttle_ms, hold_response| Reply { bytes: None, throttle_ms, hold_response };
        assert_eq!(reply(0, true).hold(), None, "nothing to hold: no timer, not even a zero one");
        assert_eq!(reply(250, true).hold(), Some(Duration::from_millis(250)));
        assert_eq!(reply(250, false).hold(), None, "the client waits the throttle out itself");
        assert_eq!(reply(-1, true).hold(), None);
    }
}

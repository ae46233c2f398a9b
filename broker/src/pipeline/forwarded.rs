//! The leader's side of forwarding (`net::forward`, `raft::transport::envelope`): a request a
//! follower forwarded goes through the pipeline's access check and its handler
//! (`pipeline::serve`), as the principal, client address and listener the follower's
//! connection had, marked `forwarded` so it is never forwarded again. The same slot serves the
//! messages other groups' leaders send for transactions across groups (`coord::xgroup`).

use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;
use kafka_compat::codec::{decode_request, encode_response};
use kafka_compat::frame::FRAME_PREFIX_BYTES;
use kafka_compat::principal::KafkaPrincipal;

use crate::ctx::SharedCtx;
use crate::handlers::{lookup, Run};
use crate::raft::transport::envelope::{Envelope, EnvelopeFuture, ForwardHandler};
use crate::raft::transport::xgroup::{XFuture, XMessage};

pub struct Forwarded {
    pub ctx: SharedCtx,
}

impl ForwardHandler for Forwarded {
    fn serve(&self, envelope: Envelope) -> EnvelopeFuture {
        let ctx = self.ctx.clone();
        Box::pin(async move { serve(ctx, envelope).await.map_err(|e| format!("{e:#}")) })
    }

    fn cross_group(&self, message: XMessage) -> XFuture {
        let ctx = self.ctx.clone();
        Box::pin(async move { crate::coord::xgroup::serve(&ctx, message).await })
    }
}

async fn serve(ctx: SharedCtx, envelope: Envelope) -> anyhow::Result<Vec<u8>> {
    let mut request = decode_request(Bytes::from(envelope.request))?;
    request.principal =
        Arc::new(KafkaPrincipal { principal_type: envelope.principal_type, name: envelope.principal_name });
    request.client_address = envelope.client_address;
    request.listener = envelope.listener.map(Arc::from);
    request.forwarded = true;
    let (key, version, corr) = (request.api_key, request.api_version, request.header.correlation_id);
    let handler = lookup(key as i16).context("no handler for the forwarded request")?;
    // Ordered handlers (Produce, OffsetCommit) are answered by the leader directly, never
    // forwarded.
    let Run::Concurrent(_) = handler.run else {
        anyhow::bail!("{key:?} is not forwarded");
    };
    let response =
        super::serve(ctx, handler, request).await?.context("the forwarded request has no response")?;
    let frame = encode_response(key, version, corr, &response)?;
    Ok(frame.slice(FRAME_PREFIX_BYTES..).to_vec())
}

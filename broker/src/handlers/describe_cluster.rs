//! DescribeCluster (key 60): the brokers (every Raft member), the controller (the Raft
//! leader) and the cluster id; authorized operations when asked (see `authorized`).

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{ApiKey, DescribeClusterResponse, RequestKind, ResponseKind};

use super::util::str_bytes;
use super::{authorized, HandlerResult};
use crate::ctx::SharedCtx;
use crate::security::authz::Subject;

pub const KEY: ApiKey = ApiKey::DescribeCluster;
pub const VERSIONS: (i16, i16) = (0, 1);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

/// v1 endpoint types: 1 = brokers; controllers are not a separate endpoint in onelog.
const ENDPOINT_BROKERS: i8 = 1;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let who = Subject::of(&req);
    let RequestKind::DescribeCluster(body) = req.body else { anyhow::bail!("not a DescribeCluster body") };
    let mut response = DescribeClusterResponse::default()
        .with_cluster_id(str_bytes(ctx.leadership.cluster_id()))
        .with_controller_id(ctx.leader_id().map_or(-1, |l| l as i32).into())
        .with_endpoint_type(ENDPOINT_BROKERS)
        .with_cluster_authorized_operations(authorized::cluster(
            &ctx,
            &who,
            body.include_cluster_authorized_operations,
        ))
        .with_brokers(
            ctx.leadership
                .brokers_on(req.listener.as_deref())
                .into_iter()
                .map(|b| {
                    DescribeClusterBroker::default()
                        .with_broker_id(b.node_id.into())
                        .with_host(str_bytes(b.host))
                        .with_port(b.port)
                })
                .collect(),
        );
    if req.api_version >= 1 && body.endpoint_type != ENDPOINT_BROKERS {
        response = response
            .with_error_code(error_code::UNSUPPORTED_ENDPOINT_TYPE)
            .with_error_message(Some(str_bytes("only broker endpoints are served")));
    }
    Ok(Some(ResponseKind::DescribeCluster(response)))
}

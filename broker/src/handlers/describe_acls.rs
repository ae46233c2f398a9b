//! DescribeAcls (key 29), v1–v3: onelog has no authorizer yet, so, as Kafka without
//! `authorizer.class.name`, the answer is SECURITY_DISABLED (54) "No Authorizer is configured."

use kafka_compat::codec::Request;
use kafka_protocol::messages::{ApiKey, DescribeAclsResponse, RequestKind, ResponseKind};

use super::util::str_bytes;
use super::{not_served, HandlerResult};
use crate::ctx::SharedCtx;

pub const KEY: ApiKey = ApiKey::DescribeAcls;
pub const VERSIONS: (i16, i16) = (1, 3);
pub const ACCEPTED_MIN_VERSION: i16 = 1;

pub async fn handle(_ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::DescribeAcls(_) = req.body else { anyhow::bail!("not a DescribeAcls body") };
    not_served::log(KEY, "no authorizer: ACLs are not implemented yet");
    Ok(Some(ResponseKind::DescribeAcls(
        DescribeAclsResponse::default()
            .with_error_code(not_served::SECURITY_DISABLED)
            .with_error_message(Some(str_bytes(not_served::NO_AUTHORIZER))),
    )))
}

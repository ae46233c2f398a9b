//! CreateAcls (key 30), v1–v3: no authorizer yet; every creation is answered
//! SECURITY_DISABLED (54) "No Authorizer is configured.", as Kafka without one answers.

use kafka_compat::codec::Request;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{ApiKey, CreateAclsResponse, RequestKind, ResponseKind};

use super::util::str_bytes;
use super::{not_served, HandlerResult};
use crate::ctx::SharedCtx;

pub const KEY: ApiKey = ApiKey::CreateAcls;
pub const VERSIONS: (i16, i16) = (1, 3);
pub const ACCEPTED_MIN_VERSION: i16 = 1;

pub async fn handle(_ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::CreateAcls(body) = req.body else { anyhow::bail!("not a CreateAcls body") };
    not_served::log(KEY, "no authorizer: ACLs are not implemented yet");
    let results = body
        .creations
        .iter()
        .map(|_| {
            AclCreationResult::default()
                .with_error_code(not_served::SECURITY_DISABLED)
                .with_error_message(Some(str_bytes(not_served::NO_AUTHORIZER)))
        })
        .collect();
    Ok(Some(ResponseKind::CreateAcls(CreateAclsResponse::default().with_results(results))))
}

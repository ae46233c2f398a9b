//! DescribeUserScramCredentials (key 50), v0: SASL/SCRAM is not built yet, so no user has a
//! credential. Kafka stores credentials whether or not a listener enables SCRAM, and answers a
//! user without one RESOURCE_NOT_FOUND (91) "Attempt to describe a user credential that does
//! not exist"; onelog answers the same for every named user, and an empty list for all users.

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::describe_user_scram_credentials_response::DescribeUserScramCredentialsResult;
use kafka_protocol::messages::{ApiKey, DescribeUserScramCredentialsResponse, RequestKind, ResponseKind};

use super::util::str_bytes;
use super::{not_served, HandlerResult};
use crate::ctx::SharedCtx;

pub const KEY: ApiKey = ApiKey::DescribeUserScramCredentials;
pub const VERSIONS: (i16, i16) = (0, 0);
pub const ACCEPTED_MIN_VERSION: i16 = 0;
const RESOURCE_NOT_FOUND: i16 = 91;
const NO_CREDENTIAL: &str = "Attempt to describe a user credential that does not exist";

pub async fn handle(_ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::DescribeUserScramCredentials(body) = req.body else {
        anyhow::bail!("not a DescribeUserScramCredentials body")
    };
    not_served::log(KEY, "SASL/SCRAM is not implemented yet: no credentials exist");
    let results = body
        .users
        .unwrap_or_default()
        .into_iter()
        .map(|u| {
            DescribeUserScramCredentialsResult::default()
                .with_user(u.name)
                .with_error_code(RESOURCE_NOT_FOUND)
                .with_error_message(Some(str_bytes(NO_CREDENTIAL)))
        })
        .collect();
    Ok(Some(ResponseKind::DescribeUserScramCredentials(
        DescribeUserScramCredentialsResponse::default()
            .with_error_code(error_code::NONE)
            .with_results(results),
    )))
}

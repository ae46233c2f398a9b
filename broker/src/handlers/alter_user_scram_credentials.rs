//! AlterUserScramCredentials (key 51), v0: SASL/SCRAM is not built yet, so a credential cannot
//! be stored; each user of the request (deletions and upsertions) is answered
//! UNSUPPORTED_SASL_MECHANISM (33) with a message saying so, rather than pretending success.

use std::collections::BTreeSet;

use kafka_compat::codec::Request;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{AlterUserScramCredentialsResponse, ApiKey, RequestKind, ResponseKind};

use super::util::str_bytes;
use super::{not_served, HandlerResult};
use crate::ctx::SharedCtx;

pub const KEY: ApiKey = ApiKey::AlterUserScramCredentials;
pub const VERSIONS: (i16, i16) = (0, 0);
pub const ACCEPTED_MIN_VERSION: i16 = 0;
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
const MESSAGE: &str = "onelog does not implement SASL/SCRAM yet: credentials cannot be stored";

pub async fn handle(_ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::AlterUserScramCredentials(body) = req.body else {
        anyhow::bail!("not an AlterUserScramCredentials body")
    };
    not_served::log(KEY, MESSAGE);
    // One result per user, as Kafka answers (a user may appear in both lists).
    let users: BTreeSet<String> = body
        .deletions
        .iter()
        .map(|d| d.name.to_string())
        .chain(body.upsertions.iter().map(|u| u.name.to_string()))
        .collect();
    let results = users
        .into_iter()
        .map(|user| {
            AlterUserScramCredentialsResult::default()
                .with_user(str_bytes(user))
                .with_error_code(UNSUPPORTED_SASL_MECHANISM)
                .with_error_message(Some(str_bytes(MESSAGE)))
        })
        .collect();
    Ok(Some(ResponseKind::AlterUserScramCredentials(
        AlterUserScramCredentialsResponse::default().with_results(results),
    )))
}

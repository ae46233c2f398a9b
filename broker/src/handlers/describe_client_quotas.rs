//! DescribeClientQuotas (key 48, KIP-546): the quota entities a filter matches, from this
//! node's applied state (any node answers, as any Kafka broker does).
//!
//! Filter components: match type 0 names an entity exactly, 1 the type's default entity, 2
//! any entity of the type; `strict` excludes entities with types beyond the filter's. Errors
//! are Kafka's: INVALID_REQUEST for a bad filter, UNSUPPORTED_VERSION for an unknown type.
//!
//! Access: CLUSTER DESCRIBE_CONFIGS, checked by the pipeline (`handlers::HANDLERS`).

use kafka_compat::codec::Request;
use kafka_compat::error_code;
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{
    ApiKey, DescribeClientQuotasRequest, DescribeClientQuotasResponse, RequestKind, ResponseKind,
};

use super::util::str_bytes;
use super::HandlerResult;
use crate::ctx::SharedCtx;
use onelog_state::quotas::{FilterComponent, FilterMatch, QuotaError};

pub const KEY: ApiKey = ApiKey::DescribeClientQuotas;
pub const VERSIONS: (i16, i16) = (0, 1);
pub const ACCEPTED_MIN_VERSION: i16 = 0;

const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_ANY: i8 = 2;

pub async fn handle(ctx: SharedCtx, req: Request) -> HandlerResult {
    let RequestKind::DescribeClientQuotas(body) = req.body else {
        anyhow::bail!("not a DescribeClientQuotas body")
    };
    let response = match filter(&body) {
        Ok(components) => {
            ctx.applied.state(|state| match state.client_quotas.describe(&components, body.strict) {
                Ok(found) => {
                    let entries = found
                        .into_iter()
                        .map(|(entity, values)| {
                            let entity = entity
                                .iter()
                                .map(|(t, name)| {
                                    EntityData::default()
                                        .with_entity_type(str_bytes(t.clone()))
                                        .with_entity_name(name.clone().map(str_bytes))
                                })
                                .collect();
                            let values = values
                                .iter()
                                .map(|(k, v)| {
                                    ValueData::default().with_key(str_bytes(k.clone())).with_value(v.get())
                                })
                                .collect();
                            EntryData::default().with_entity(entity).with_values(values)
                        })
                        .collect();
                    DescribeClientQuotasResponse::default().with_entries(Some(entries))
                }
                Err(e) => failed(e),
            })
        }
        Err(e) => failed(e),
    };
    Ok(Some(ResponseKind::DescribeClientQuotas(response)))
}

fn filter(body: &DescribeClientQuotasRequest) -> Result<Vec<FilterComponent>, QuotaError> {
    body.components
        .iter()
        .map(|c| {
            let matches = match (c.match_type, &c._match) {
                (MATCH_EXACT, Some(name)) => FilterMatch::Exact(name.to_string()),
                (MATCH_DEFAULT, _) => FilterMatch::Default,
                (MATCH_ANY, _) => FilterMatch::Any,
                (MATCH_EXACT, None) => {
                    return Err(invalid(format!(
                        "Invalid match for an exact {} filter: no name",
                        c.entity_type
                    )))
                }
                (other, _) => return Err(invalid(format!("Unexpected match type: {other}"))),
            };
            Ok(FilterComponent { entity_type: c.entity_type.to_string(), matches })
        })
        .collect()
}

fn invalid(message: String) -> QuotaError {
    QuotaError { error_code: error_code::INVALID_REQUEST, message }
}

fn failed(e: QuotaError) -> DescribeClientQuotasResponse {
    DescribeClientQuotasResponse::default()
        .with_error_code(e.error_code)
        .with_error_message(Some(str_bytes(e.message)))
        .with_entries(None)
}

/// The whole request refused with `code` at the top level, entries null
/// (`DescribeClientQuotasRequest.getErrorResponse`).
pub fn refused(body: &RequestKind, code: i16) -> ResponseKind {
    let RequestKind::DescribeClientQuotas(_) = body else {
        return ResponseKind::DescribeClientQuotas(Default::default());
    };
    ResponseKind::DescribeClientQuotas(
        DescribeClientQuotasResponse::default()
            .with_error_code(code)
            .with_error_message(None)
            .with_entries(None),
    )
}

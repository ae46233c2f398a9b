//! What the handlers of APIs onelog cannot honour share: one log line per API and minute (an
//! admin tool polling must not flood the log), and the messages they answer with. Each API
//! still has its own handler file, which picks the precise Kafka error code.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kafka_protocol::messages::ApiKey;

/// At most one "not served" line per API key in this interval.
const LOG_INTERVAL: Duration = Duration::from_secs(60);

/// What Kafka answers the ACL APIs when no authorizer is configured (`AclApis`).
pub use kafka_compat::error_code::SECURITY_DISABLED;
pub const NO_AUTHORIZER: &str = "No Authorizer is configured.";

static LAST_LOGGED: Mutex<BTreeMap<i16, Instant>> = Mutex::new(BTreeMap::new());

/// Logs, rate-limited per API, that a client asked for something onelog does not serve.
pub fn log(key: ApiKey, why: &str) {
    let now = Instant::now();
    let mut last = LAST_LOGGED.lock().expect("not-served log lock");
    let due = last.get(&(key as i16)).is_none_or(|at| now.duration_since(*at) >= LOG_INTERVAL);
    if due {
        last.insert(key as i16, now);
        tracing::info!(api = ?key, "not served: {why}");
    }
}

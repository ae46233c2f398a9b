//! Topic name validation, with Kafka's own rules (`org.apache.kafka.common.internals.Topic`).

/// Kafka's maximum topic name length (249: leaves room for a partition suffix in file names).
pub const TOPIC_NAME_LEN_MAX: usize = 249;

/// Returns why `name` is not a legal Kafka topic name, or `None` if it is.
pub fn topic_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("topic name is empty");
    }
    if name == "." || name == ".." {
        return Some("topic name cannot be '.' or '..'");
    }
    if name.len() > TOPIC_NAME_LEN_MAX {
        return Some("topic name is longer than 249 characters");
    }
    let legal = |c: char| c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-';
    if !name.chars().all(legal) {
        return Some("topic name contains characters other than ASCII alphanumerics, '.', '_' and '-'");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_rules() {
        assert!(topic_name_problem("orders-1.v2_x").is_none());
        assert!(topic_name_problem("").is_some());
        assert!(topic_name_problem("..").is_some());
        assert!(topic_name_problem("bad/name").is_some());
        assert!(topic_name_problem(&"a".repeat(250)).is_some());
        assert!(topic_name_problem(&"a".repeat(249)).is_none());
    }
}

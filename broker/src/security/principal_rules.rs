//! `ssl.principal.mapping.rules`: Kafka's `SslPrincipalMapper`, which turns a client
//! certificate's subject DN (RFC 2253, as Java's `X500Principal.getName()`) into the user name
//! of its principal. Rules are tried in order; `DEFAULT` keeps the DN; `RULE:pattern/replacement/`
//! applies when the pattern matches the whole DN, with an optional `L` or `U` to change case.
//! No rule applying is an authentication failure, as in Kafka. Parsed at start-up, so a bad
//! rule fails there with Kafka's message.

use anyhow::bail;
use regex::Regex;

/// One parsed rule.
#[derive(Debug, Clone)]
enum Rule {
    Default,
    Replace {
        /// Anchored: Java's `Matcher.matches()`.
        whole: Regex,
        /// Unanchored, for `String.replaceAll`.
        pattern: Regex,
        /// The replacement in the regex crate's syntax (`${1}`, `$$`).
        replacement: String,
        lower: bool,
        upper: bool,
    },
}

/// The rules of one listener.
#[derive(Debug, Clone)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
    text: String,
}

impl PrincipalMapper {
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let mut rules = Vec::new();
        let mut rest = text.trim_start();
        while !rest.is_empty() {
            let (rule, after) = if let Some(after) = rest.strip_prefix("DEFAULT") {
                (Rule::Default, after)
            } else if let Some(after) = rest.strip_prefix("RULE:") {
                parse_rule(after, rest)?
            } else {
                let end = rest.find(',').unwrap_or(rest.len());
                bail!("Invalid rule: {}", rest[..end].trim());
            };
            rules.push(rule);
            let after = after.trim_start();
            rest = match after.strip_prefix(',') {
                Some(next) => next.trim_start(),
                None if after.is_empty() => after,
                None => bail!("Invalid rule: `{}`, unmatched substring: `{after}`", rest.trim()),
            };
        }
        if rules.is_empty() {
            rules.push(Rule::Default);
        }
        Ok(PrincipalMapper { rules, text: text.to_string() })
    }

    /// The user name for `dn`, or Kafka's "No rules apply" message.
    pub fn name(&self, dn: &str) -> Result<String, String> {
        for rule in &self.rules {
            match rule {
                Rule::Default => return Ok(dn.to_string()),
                Rule::Replace { whole, pattern, replacement, lower, upper } => {
                    if !whole.is_match(dn) {
                        continue;
                    }
                    let mut name = pattern.replace_all(dn, replacement.as_str()).into_owned();
                    if *lower {
                        name = name.to_lowercase();
                    } else if *upper {
                        name = name.to_uppercase();
                    }
                    return Ok(name);
                }
            }
        }
        Err(format!("No rules apply to {dn}, rules [{}]", self.text))
    }
}

/// `pattern/replacement/[LU]` after `RULE:`: (rule, the text after it).
fn parse_rule<'a>(text: &'a str, whole_rule: &str) -> anyhow::Result<(Rule, &'a str)> {
    let invalid = || anyhow::anyhow!("Invalid rule: {}", whole_rule.trim());
    let (pattern, after) = until_slash(text).ok_or_else(invalid)?;
    let (replacement, after) = until_slash(after).ok_or_else(invalid)?;
    let (lower, upper, after) = match after.as_bytes().first() {
        Some(b'L') => (true, false, &after[1..]),
        Some(b'U') => (false, true, &after[1..]),
        _ => (false, false, after),
    };
    let compile =
        |p: &str| Regex::new(p).map_err(|e| anyhow::anyhow!("Invalid rule: {}: {e}", whole_rule.trim()));
    let rule = Rule::Replace {
        whole: compile(&format!("^(?:{pattern})$"))?,
        pattern: compile(pattern)?,
        replacement: java_replacement(replacement),
        lower,
        upper,
    };
    Ok((rule, after))
}

/// The text before the first unescaped `/`, and the text after that slash.
fn until_slash(text: &str) -> Option<(&str, &str)> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'/' => return Some((&text[..i], &text[i + 1..])),
            _ => i += 1,
        }
    }
    None
}

/// A Java `replaceAll` replacement (`$1`, `\$`) in the regex crate's syntax.
fn java_replacement(java: &str) -> String {
    let mut out = String::new();
    let mut chars = java.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => {}
            },
            '$' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                if digits.is_empty() {
                    out.push_str("$$");
                } else {
                    out.push_str(&format!("${{{digits}}}"));
                }
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_keeps_the_dn() {
        let m = PrincipalMapper::parse("DEFAULT").unwrap();
        assert_eq!(m.name("CN=alice,OU=eng,O=acme").unwrap(), "CN=alice,OU=eng,O=acme");
    }

    #[test]
    fn kafkas_documented_rules() {
        // The examples of Kafka's documentation and SslPrincipalMapperTest.
        let m = PrincipalMapper::parse(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,\
             RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,DEFAULT",
        )
        .unwrap();
        assert_eq!(
            m.name("CN=kafka-server1,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown").unwrap(),
            "kafka-server1"
        );
        assert_eq!(
            m.name("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Unknown,ST=Unknown,C=Unknown").unwrap(),
            "duke@javasoft"
        );
        assert_eq!(m.name("cn=duke,ou=javasoft,dc=sun,dc=com").unwrap(), "DUKE@JAVASOFT");
        assert_eq!(m.name("OU=JavaSoft,CN=Duke").unwrap(), "DUKE");
        assert_eq!(m.name("OU=nobody").unwrap(), "OU=nobody");
    }

    #[test]
    fn escaped_slashes_and_no_matching_rule() {
        let m = PrincipalMapper::parse("RULE:^CN=([^,]*)\\/x,.*$/u-$1/").unwrap();
        assert_eq!(m.name("CN=a/x,O=b").unwrap(), "u-a");
        assert!(m.name("O=b").unwrap_err().starts_with("No rules apply to O=b"));
    }

    #[test]
    fn invalid_rules_fail_with_kafkas_message() {
        assert!(PrincipalMapper::parse("RULE:^CN=(.*)$/$1")
            .unwrap_err()
            .to_string()
            .starts_with("Invalid rule"));
        assert!(PrincipalMapper::parse("NONSENSE").unwrap_err().to_string().starts_with("Invalid rule"));
        assert!(PrincipalMapper::parse("DEFAULT junk")
            .unwrap_err()
            .to_string()
            .contains("unmatched substring"));
        assert!(PrincipalMapper::parse("RULE:(/$1/").is_err());
    }
}

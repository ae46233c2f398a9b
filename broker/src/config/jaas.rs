//! The broker's `sasl.jaas.config` values (Kafka's `JaasConfig` syntax): `Class flag key="value" …;`
//! per login module. onelog reads only what its SASL mechanisms need: PLAIN's `user_NAME="password"`
//! entries (Kafka's `PlainServerCallbackHandler` reads the same options).

use std::collections::BTreeMap;

use anyhow::{bail, Context};

/// One login module: its class, control flag and options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginModule {
    pub class: String,
    pub flag: String,
    pub options: BTreeMap<String, String>,
}

/// Kafka's message for a value that is not JAAS syntax.
fn invalid(why: &str) -> anyhow::Error {
    anyhow::anyhow!("Value not specified correctly in JAAS config: {why}")
}

/// Parses every login module of a `sasl.jaas.config` value.
pub fn parse(text: &str) -> anyhow::Result<Vec<LoginModule>> {
    let tokens = tokens(text)?;
    let mut modules = Vec::new();
    let mut it = tokens.into_iter().peekable();
    while let Some(class) = it.next() {
        let Token::Word(class) = class else { return Err(invalid("expected a login module class")) };
        let Some(Token::Word(flag)) = it.next() else { return Err(invalid("expected a control flag")) };
        if !["required", "requisite", "sufficient", "optional"].contains(&flag.to_ascii_lowercase().as_str())
        {
            bail!("Invalid login module control flag '{flag}' in JAAS config");
        }
        let mut options = BTreeMap::new();
        loop {
            match it.next() {
                Some(Token::Semicolon) => break,
                Some(Token::Word(key)) => {
                    let Some(Token::Equals) = it.next() else {
                        return Err(invalid("expected = after an option name"));
                    };
                    let value = match it.next() {
                        Some(Token::Word(v) | Token::Quoted(v)) => v,
                        _ => return Err(invalid("expected an option value")),
                    };
                    options.insert(key, value);
                }
                _ => return Err(invalid("login module not terminated by ';'")),
            }
        }
        modules.push(LoginModule { class, flag, options });
    }
    if modules.is_empty() {
        return Err(invalid("no login module"));
    }
    Ok(modules)
}

/// PLAIN's users (`user_NAME="password"`) from a JAAS config value.
pub fn plain_users(text: &str) -> anyhow::Result<BTreeMap<String, String>> {
    let modules = parse(text).context("sasl.jaas.config")?;
    Ok(modules
        .iter()
        .flat_map(|m| m.options.iter())
        .filter_map(|(k, v)| Some((k.strip_prefix("user_")?.to_string(), v.clone())))
        .collect())
}

#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    Quoted(String),
    Equals,
    Semicolon,
}

/// Java `StreamTokenizer`'s view of the text: words, double-quoted strings (backslash escapes
/// the next character), `=` and `;`.
fn tokens(text: &str) -> anyhow::Result<Vec<Token>> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            '=' => {
                chars.next();
                out.push(Token::Equals);
            }
            ';' => {
                chars.next();
                out.push(Token::Semicolon);
            }
            '"' | '\'' => {
                let quote = c;
                chars.next();
                let mut value = String::new();
                loop {
                    match chars.next() {
                        None => return Err(invalid("unterminated quoted string")),
                        Some(q) if q == quote => break,
                        Some('\\') => value.extend(chars.next()),
                        Some(other) => value.push(other),
                    }
                }
                out.push(Token::Quoted(value));
            }
            _ => {
                let mut word = String::new();
                while let Some(&w) = chars.peek() {
                    if w.is_whitespace() || matches!(w, '=' | ';' | '"' | '\'') {
                        break;
                    }
                    word.push(w);
                    chars.next();
                }
                out.push(Token::Word(word));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_login_module_users() {
        let users = plain_users(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="al\"ice";"#,
        )
        .unwrap();
        assert_eq!(users.len(), 2);
        assert_eq!(users["admin"], "admin-secret");
        assert_eq!(users["alice"], "al\"ice");
    }

    #[test]
    fn malformed_configs_are_refused() {
        assert!(parse("").is_err());
        assert!(parse("Module required user_a=\"b\"").is_err());
        assert!(parse("Module sometimes;").is_err());
        assert!(parse("Module required user_a;").is_err());
        assert!(parse("Module required user_a=\"b;").is_err());
        assert_eq!(parse("M optional;").unwrap()[0].class, "M");
    }
}

//! Who may change the cluster through the admin API. Reads (`GET`: the status page, `/status`,
//! `/metrics`, `/digest`) are open to whoever reaches the port, as Kafka's metrics and JMX
//! usually are; every `POST` (membership, elections, leadership transfer, checkpoints) needs:
//!
//! - with `onelog.admin.token.file` set: `Authorization: Bearer <token>`, compared in constant
//!   time; none is 401, another is 403;
//! - without it: a caller on this machine (a loopback address); anyone else gets 403 naming
//!   the config. Membership changes therefore never come from the network unauthenticated.

use std::net::IpAddr;

use subtle::ConstantTimeEq;

use super::routes::Response;

/// `Ok` if the request may proceed; the refusal otherwise.
pub fn check(
    post: bool,
    peer: IpAddr,
    authorization: Option<&[u8]>,
    token: Option<&[u8]>,
) -> Result<(), Response> {
    if !post {
        return Ok(());
    }
    let Some(token) = token else {
        if peer.is_loopback() {
            return Ok(());
        }
        return Err(Response::error(
            403,
            format!(
                "changes through the admin API come from this machine only ({peer} is not a loopback address); \
                 set onelog.admin.token.file to allow them with a bearer token"
            ),
        ));
    };
    let Some(given) = authorization.and_then(|h| h.strip_prefix(b"Bearer ")) else {
        return Err(Response::error(
            401,
            "this admin API needs Authorization: Bearer <token> (onelog.admin.token.file)",
        ));
    };
    if bool::from(given.trim_ascii().ct_eq(token)) {
        Ok(())
    } else {
        Err(Response::error(403, "wrong admin token"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCAL: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    const REMOTE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 1, 2, 3));
    const TOKEN: &[u8] = b"an admin token of some length";

    fn status(result: Result<(), Response>) -> u16 {
        result.map_or_else(|r| r.status, |()| 200)
    }

    #[test]
    fn reads_are_open_and_changes_need_loopback_or_the_token() {
        assert_eq!(status(check(false, REMOTE, None, Some(TOKEN))), 200);
        assert_eq!(status(check(false, REMOTE, None, None)), 200);
        assert_eq!(status(check(true, LOCAL, None, None)), 200);
        assert_eq!(status(check(true, REMOTE, None, None)), 403);
        assert_eq!(status(check(true, REMOTE, Some(b"Bearer an admin token of some length"), None)), 403);
        assert_eq!(
            status(check(true, LOCAL, None, Some(TOKEN))),
            401,
            "a token, once set, is needed locally too"
        );
        assert_eq!(status(check(true, REMOTE, Some(b"Basic eDp5"), Some(TOKEN))), 401);
        assert_eq!(status(check(true, REMOTE, Some(b"Bearer an admin token"), Some(TOKEN))), 403);
        assert_eq!(
            status(check(true, REMOTE, Some(b"Bearer an admin token of some length"), Some(TOKEN))),
            200
        );
    }
}

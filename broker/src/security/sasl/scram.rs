//! SASL/SCRAM-SHA-256 and SCRAM-SHA-512 on the connection: the [`SaslServer`] face of
//! `scram::ServerExchange`, which checks the client's proof against the credentials in the
//! replicated state (created with AlterUserScramCredentials, `kafka-configs --entity-type users`).

use super::{AuthFailure, SaslServer, Step};
use crate::raft::applied::AppliedView;
use crate::security::scram::{self, Mechanism, ScramError, ServerExchange};

pub struct ScramServer {
    mechanism: Mechanism,
    exchange: ServerExchange,
}

impl ScramServer {
    pub fn new(mechanism: Mechanism, applied: AppliedView) -> Self {
        ScramServer { mechanism, exchange: ServerExchange::new(mechanism, applied) }
    }
}

impl SaslServer for ScramServer {
    fn mechanism(&self) -> &'static str {
        self.mechanism.name()
    }

    fn evaluate(&mut self, token: &[u8]) -> Result<Step, AuthFailure> {
        match self.exchange.step(token) {
            Ok(scram::Step::Challenge(challenge)) => Ok(Step::Challenge(challenge)),
            Ok(scram::Step::Complete { response, user }) => Ok(Step::Complete { response, user }),
            // Kafka's message (`ScramSaslServer`): the same for an unknown user and a wrong
            // password.
            Err(ScramError::InvalidCredentials { user }) => Err(AuthFailure {
                message: format!(
                    "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
                    self.mechanism.name()
                ),
                user: Some(user),
            }),
            Err(other) => Err(AuthFailure { message: format!("Authentication failed: {other}"), user: None }),
        }
    }
}

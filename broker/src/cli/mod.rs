//! `onelog admin`: the operator's command line, over a running cluster's HTTP admin API
//! (`status`, `add-node`, `remove-node`, `transfer-leader`) and its Kafka API (`topics`,
//! `groups`, `transactions`, as `kafka-topics.sh`, `kafka-consumer-groups.sh` and
//! `kafka-transactions.sh` do them).
//!
//! Every command prints aligned tables, or with `--json` one JSON value with stable field
//! names; any failure (a node that is down, an unknown group, an error code in an answer) is
//! one message on stderr naming what was asked where, and a non-zero exit status.

mod groups;
mod http;
mod kafka;
mod members;
mod status;
mod table;
mod topics;
mod transactions;

use std::process::ExitCode;

use clap::{Args, Subcommand};

use http::AdminApi;
use table::Report;

/// Operate a running onelog cluster through its admin API and its Kafka API.
#[derive(Debug, Clone, Args)]
pub struct AdminArgs {
    /// Admin API addresses (`--admin-listen` of the nodes), comma separated; leader-only
    /// commands try each in turn until the leader accepts.
    #[arg(
        long,
        global = true,
        value_delimiter = ',',
        default_value = "127.0.0.1:9292",
        value_name = "HOST:PORT"
    )]
    pub admin: Vec<String>,
    /// Kafka listeners to start from, comma separated (the first that answers is asked);
    /// Metadata leads on to the leader.
    #[arg(
        long,
        global = true,
        value_delimiter = ',',
        default_value = "127.0.0.1:9092",
        value_name = "HOST:PORT"
    )]
    pub bootstrap: Vec<String>,
    /// Print one JSON value instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// File holding the admin API's bearer token (the nodes' `onelog.admin.token.file`), sent
    /// with every request; changes need it when the nodes have one.
    #[arg(long, global = true, value_name = "PATH")]
    pub token_file: Option<std::path::PathBuf>,
    /// PEM file of the CA that signed the admin API's certificate (the nodes'
    /// `onelog.admin.ssl.keystore.location`): the admin API is then spoken over HTTPS, the
    /// server's certificate checked against it and the address's host. Default:
    /// `ONELOG_ADMIN_CA`; unset, plain HTTP.
    #[arg(long, global = true, value_name = "PATH")]
    pub admin_ca: Option<std::path::PathBuf>,
    /// PEM file with a client certificate and its key, presented over HTTPS when the nodes ask
    /// for one (`onelog.admin.ssl.client.auth`). Default: `ONELOG_ADMIN_KEYSTORE`.
    #[arg(long, global = true, value_name = "PATH")]
    pub admin_keystore: Option<std::path::PathBuf>,
    #[command(subcommand)]
    pub command: AdminCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum AdminCommand {
    /// Leader, term and every node's role and log indexes (admin API).
    Status,
    /// Add a node as a learner, wait for it to catch up, then make it a voter (admin API).
    AddNode(members::AddNode),
    /// Remove a node, voter or learner; it shuts itself down (admin API).
    RemoveNode {
        /// The node id.
        id: u64,
    },
    /// Hand leadership of a Raft group to another of its voters (admin API).
    TransferLeader {
        /// The voter to lead.
        to: u64,
        /// The Raft group (`onelog.raft.groups`); 0, the metadata group, by default.
        #[arg(long, default_value_t = 0)]
        group: u32,
    },
    /// Transactions: list, describe, abort (Kafka API).
    #[command(subcommand)]
    Transactions(transactions::TxnCommand),
    /// Consumer groups: list, describe with lag (Kafka API).
    #[command(subcommand)]
    Groups(groups::GroupCommand),
    /// Topics: list, describe with offsets (Kafka API).
    #[command(subcommand)]
    Topics(topics::TopicCommand),
}

/// Runs one admin command and prints its report; the exit status says whether it worked.
pub fn run(args: AdminArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("onelog admin: cannot start a runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(dispatch(&args)) {
        Ok(report) => {
            if args.json {
                println!("{}", serde_json::to_string_pretty(&report.json).unwrap_or_default());
            } else {
                println!("{}", report.text);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("onelog admin: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn dispatch(args: &AdminArgs) -> anyhow::Result<Report> {
    let token = match &args.token_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("reading --token-file {}: {e}", path.display()))?
                .trim()
                .to_string(),
        ),
        None => None,
    };
    let or_env = |flag: &Option<std::path::PathBuf>, var: &str| {
        flag.clone().or_else(|| std::env::var_os(var).filter(|v| !v.is_empty()).map(Into::into))
    };
    let tls = match or_env(&args.admin_ca, "ONELOG_ADMIN_CA") {
        Some(ca) => {
            Some(http::tls_config(&ca, or_env(&args.admin_keystore, "ONELOG_ADMIN_KEYSTORE").as_deref())?)
        }
        None => None,
    };
    let admin = AdminApi { addrs: args.admin.clone(), token, tls };
    match &args.command {
        AdminCommand::Status => status::status(&admin).await,
        AdminCommand::AddNode(add) => members::add_node(&admin, add).await,
        AdminCommand::RemoveNode { id } => members::remove_node(&admin, *id).await,
        AdminCommand::TransferLeader { to, group } => members::transfer_leader(&admin, *to, *group).await,
        AdminCommand::Transactions(command) => transactions::run(&args.bootstrap, command).await,
        AdminCommand::Groups(command) => groups::run(&args.bootstrap, command).await,
        AdminCommand::Topics(command) => topics::run(&args.bootstrap, command).await,
    }
}

/// A connect error as people say it (`connection refused`), the OS's text when it has no
/// plainer name.
fn net_error(e: &std::io::Error) -> String {
    use std::io::ErrorKind::*;
    match e.kind() {
        ConnectionRefused | ConnectionReset | TimedOut | AddrNotAvailable => e.kind().to_string(),
        _ => e.to_string(),
    }
}

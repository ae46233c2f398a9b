//! A TLS configuration rebuilt when its files change: the keystore and truststore are polled
//! (`TLS_RELOAD_POLL_MS`), and a change that loads replaces the configuration new connections
//! get, so certificates rotate without a restart. A change that does not load leaves the
//! configuration in force and says why, once per change. Shared by the Kafka listeners
//! (`net::tls::Tls`), the Raft port (`raft::transport::tls`) and the admin API.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use crate::limits;

/// What builds the configuration from the files as they are now.
type Build<T> = Box<dyn Fn() -> anyhow::Result<Arc<T>> + Send + Sync>;

/// A configuration built from `files`, replaced when they change (see [`Reloading::watch`]).
pub struct Reloading<T> {
    files: Vec<PathBuf>,
    build: Build<T>,
    current: RwLock<Arc<T>>,
}

/// A file's identity for the reload poll: its modification time and length.
type Stamp = Option<(SystemTime, u64)>;

fn stamp(path: &Path) -> Stamp {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

impl<T: Send + Sync + 'static> Reloading<T> {
    /// Builds the configuration once; fails (start-up) if the files do not make one.
    pub fn new(
        files: Vec<PathBuf>,
        build: impl Fn() -> anyhow::Result<Arc<T>> + Send + Sync + 'static,
    ) -> anyhow::Result<Arc<Self>> {
        let config = build()?;
        Ok(Arc::new(Reloading { files, build: Box::new(build), current: RwLock::new(config) }))
    }

    /// The configuration a new connection gets.
    pub fn current(&self) -> Arc<T> {
        self.current.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Polls the files for as long as this configuration is in use; `listener` names it in
    /// log lines.
    pub fn watch(self: &Arc<Self>, listener: Arc<str>) {
        let tls = Arc::downgrade(self);
        let files = self.files.clone();
        tokio::spawn(async move {
            let mut seen: Vec<Stamp> = files.iter().map(|f| stamp(f)).collect();
            loop {
                tokio::time::sleep(Duration::from_millis(limits::TLS_RELOAD_POLL_MS)).await;
                let Some(tls) = tls.upgrade() else { return };
                let now: Vec<Stamp> = files.iter().map(|f| stamp(f)).collect();
                if now == seen {
                    continue;
                }
                seen = now;
                match (tls.build)() {
                    Ok(config) => {
                        *tls.current.write().unwrap_or_else(|e| e.into_inner()) = config;
                        tracing::info!(%listener, "TLS keystore or truststore changed: new connections use the new certificates");
                    }
                    Err(e) => tracing::warn!(
                        %listener,
                        error = %format!("{e:#}"),
                        "TLS keystore or truststore changed but does not load; keeping the certificates in use"
                    ),
                }
            }
        });
    }
}

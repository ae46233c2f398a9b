//! Broker process control: spawn `onelog` on a free port with its own directory, wait until it
//! answers ApiVersions, kill it with SIGKILL or SIGTERM, restart it on the same port and data.
//!
//! Every test owns its broker: one process, one temporary directory, one port. The node
//! directory holds `data/` (the broker's `--data-dir`) and `onelog.log` (stdout and stderr of
//! every run, appended), which `Drop` prints and keeps when the test panics.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use tempfile::TempDir;

use crate::ports::free_port;
use crate::probe::probe_api_versions;

/// How long a broker may take from spawn to answering ApiVersions.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `terminate` waits for a clean exit after SIGTERM.
pub const TERMINATE_TIMEOUT: Duration = Duration::from_secs(30);
/// Log lines printed when a test panics with a broker alive.
pub const LOG_TAIL_LINES: usize = 60;
/// Spawn attempts when another process takes the chosen port first.
const PORT_ATTEMPTS: usize = 3;

/// The lines of a broker log that contain every one of `needles`, colour codes removed (the
/// broker's log colours its fields, in a file too). Tests that inject a fault assert its log
/// line this way: a binary built without the `fault-injection` feature ignores the fault
/// variables and never writes it.
pub fn log_lines_with(log: &Path, needles: &[&str]) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(log).with_context(|| format!("reading {}", log.display()))?;
    Ok(text.lines().map(strip_ansi).filter(|line| needles.iter().all(|n| line.contains(n))).collect())
}

/// `line` without ANSI escape sequences (`ESC [ ... letter`).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// How to run one broker.
#[derive(Debug, Clone)]
pub struct BrokerOptions {
    pub node_id: u64,
    /// `--config key=value` overrides, in order.
    pub configs: Vec<(String, String)>,
    /// Extra environment variables (e.g. `ONELOG_FAULT`).
    pub env: Vec<(String, String)>,
    /// Extra command-line arguments, after the harness's own (e.g. `--config-file PATH`).
    pub args: Vec<String>,
    /// The process's working directory (where it looks for `onelog.toml`); inherited if `None`.
    pub current_dir: Option<PathBuf>,
    /// Node directory; a fresh temporary one when `None`.
    pub dir: Option<PathBuf>,
    /// The `onelog` binary; [`onelog_binary`] when `None`.
    pub binary: Option<PathBuf>,
    /// Soft and hard RLIMIT_NOFILE of the process (`ulimit -n`); inherited when `None`.
    pub open_files_max: Option<u64>,
}

impl Default for BrokerOptions {
    fn default() -> Self {
        Self {
            node_id: 1,
            configs: Vec::new(),
            env: Vec::new(),
            args: Vec::new(),
            current_dir: None,
            dir: None,
            binary: None,
            open_files_max: None,
        }
    }
}

impl BrokerOptions {
    /// Adds a `--config key=value` override.
    pub fn config(mut self, key: &str, value: impl ToString) -> Self {
        self.configs.push((key.to_owned(), value.to_string()));
        self
    }

    /// Adds an environment variable.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Adds a command-line argument.
    pub fn arg(mut self, arg: impl ToString) -> Self {
        self.args.push(arg.to_string());
        self
    }

    /// Runs the process in `dir`.
    pub fn current_dir(mut self, dir: &Path) -> Self {
        self.current_dir = Some(dir.to_path_buf());
        self
    }
}

enum NodeDir {
    Temp(TempDir),
    Given(PathBuf),
}

impl NodeDir {
    fn path(&self) -> &Path {
        match self {
            NodeDir::Temp(t) => t.path(),
            NodeDir::Given(p) => p,
        }
    }
}

/// A running (or stopped, between kill and restart) onelog process.
pub struct Broker {
    options: BrokerOptions,
    binary: PathBuf,
    dir: NodeDir,
    port: u16,
    child: Option<Child>,
}

impl Broker {
    /// Spawns a broker on a free port and waits until it answers ApiVersions.
    pub fn start(options: BrokerOptions) -> Result<Self> {
        let binary = match &options.binary {
            Some(b) => b.clone(),
            None => onelog_binary("debug")?,
        };
        let dir = match &options.dir {
            Some(d) => {
                std::fs::create_dir_all(d)?;
                NodeDir::Given(d.clone())
            }
            None => NodeDir::Temp(tempfile::Builder::new().prefix("onelog-node-").tempdir()?),
        };
        let mut broker = Self { options, binary, dir, port: 0, child: None };
        broker.start_on_free_port()?;
        Ok(broker)
    }

    fn start_on_free_port(&mut self) -> Result<()> {
        let mut last_error = None;
        for _ in 0..PORT_ATTEMPTS {
            self.port = free_port()?;
            match self.spawn_and_wait() {
                Ok(()) => return Ok(()),
                Err(e) if self.log_mentions_port_in_use() => last_error = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow!("no port")))
    }

    /// Starts the stopped broker again on the same port and directory with the current options.
    pub fn restart(&mut self) -> Result<()> {
        if let Some(child) = &mut self.child {
            if child.try_wait()?.is_none() {
                bail!("restart: broker pid {} is still running", child.id());
            }
            self.child = None;
        }
        self.spawn_and_wait()
    }

    /// Options used by the next [`Broker::restart`] (e.g. to drop `ONELOG_FAULT`).
    pub fn options_mut(&mut self) -> &mut BrokerOptions {
        &mut self.options
    }

    fn spawn_and_wait(&mut self) -> Result<()> {
        let data_dir = self.data_dir();
        std::fs::create_dir_all(&data_dir)?;
        let log = File::options().create(true).append(true).open(self.log_path())?;
        let listen = format!("127.0.0.1:{}", self.port);
        let mut command = Command::new(&self.binary);
        command
            .arg("--node-id")
            .arg(self.options.node_id.to_string())
            .arg("--data-dir")
            .arg(&data_dir)
            .arg("--kafka-listen")
            .arg(&listen)
            .arg("--advertised-kafka")
            .arg(&listen);
        for (key, value) in &self.options.configs {
            command.arg("--config").arg(format!("{key}={value}"));
        }
        command.args(&self.options.args);
        if let Some(dir) = &self.options.current_dir {
            command.current_dir(dir);
        }
        command.envs(self.options.env.iter().map(|(k, v)| (k, v)));
        if let Some(max) = self.options.open_files_max {
            limit_open_files(&mut command, max);
        }
        command.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
        let child = command.spawn().with_context(|| format!("spawning {}", self.binary.display()))?;
        self.child = Some(child);
        self.wait_ready()
    }

    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = self.child_mut()?.try_wait()? {
                self.child = None;
                bail!("broker exited before ready ({status}); log tail:\n{}", self.log_tail(LOG_TAIL_LINES));
            }
            if probe_api_versions(self.addr(), Duration::from_secs(2)).is_ok() {
                return Ok(());
            }
            if Instant::now() > deadline {
                let error = probe_api_versions(self.addr(), Duration::from_secs(2)).unwrap_err();
                bail!(
                    "broker not ready within {READY_TIMEOUT:?}: {error:#}; log tail:\n{}",
                    self.log_tail(LOG_TAIL_LINES)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILL, then reap. The directory and port stay for [`Broker::restart`].
    pub fn kill9(&mut self) -> Result<()> {
        let mut child = self.child.take().context("kill9: broker not running")?;
        child.kill().context("SIGKILL")?;
        child.wait()?;
        Ok(())
    }

    /// SIGTERM, then wait for the exit; returns its status.
    pub fn terminate(&mut self) -> Result<ExitStatus> {
        let pid = self.child_mut()?.id();
        // SAFETY: kill(2) on a pid we spawned and have not reaped, so it names our child.
        if unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) } != 0 {
            return Err(std::io::Error::last_os_error()).context("SIGTERM");
        }
        self.wait_exit(TERMINATE_TIMEOUT)
    }

    /// Waits up to `timeout` for the process to exit by itself (e.g. an injected crash).
    pub fn wait_exit(&mut self, timeout: Duration) -> Result<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child_mut()?.try_wait()? {
                self.child = None;
                return Ok(status);
            }
            if Instant::now() > deadline {
                bail!("broker still running after {timeout:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the process is alive.
    pub fn is_running(&mut self) -> bool {
        match &mut self.child {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    fn child_mut(&mut self) -> Result<&mut Child> {
        self.child.as_mut().context("broker not running")
    }

    /// The Kafka listener address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// `host:port` for `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        self.addr().to_string()
    }

    /// The process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The node directory (holds `data/` and `onelog.log`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The broker's `--data-dir`.
    pub fn data_dir(&self) -> PathBuf {
        self.dir().join("data")
    }

    /// The file that receives the broker's stdout and stderr.
    pub fn log_path(&self) -> PathBuf {
        self.dir().join("onelog.log")
    }

    /// The last `lines` lines of the broker log.
    pub fn log_tail(&self, lines: usize) -> String {
        let Ok(file) = File::open(self.log_path()) else {
            return String::from("<no log>");
        };
        let all: Vec<String> = BufReader::new(file).lines().map_while(|l| l.ok()).collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Returns the value, or panics with the error so that `Drop` prints the log tail and keeps
    /// the node directory. Tests end with `broker.unwrap_or_dump(scenario(&mut broker).await)`.
    pub fn unwrap_or_dump<T>(&self, result: Result<T>) -> T {
        match result {
            Ok(value) => value,
            Err(error) => panic!("{error:?}"),
        }
    }

    fn log_mentions_port_in_use(&self) -> bool {
        self.log_tail(LOG_TAIL_LINES).contains("in use")
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "--- onelog log tail ({}) ---\n{}\n---",
                self.log_path().display(),
                self.log_tail(LOG_TAIL_LINES)
            );
            if let NodeDir::Temp(temp) = std::mem::replace(&mut self.dir, NodeDir::Given(PathBuf::new())) {
                eprintln!("kept node directory {}", temp.keep().display());
            }
        }
    }
}

/// Sets the child's soft and hard RLIMIT_NOFILE to `max` between fork and exec.
fn limit_open_files(command: &mut Command, max: u64) {
    use std::os::unix::process::CommandExt;
    let limit = libc::rlimit { rlim_cur: max as libc::rlim_t, rlim_max: max as libc::rlim_t };
    // SAFETY: the closure runs in the forked child before exec and only calls setrlimit,
    // which is async-signal-safe, on a struct copied into the closure.
    unsafe {
        command.pre_exec(move || {
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The onelog binary for `profile` ("debug" or "release"): `ONELOG_BIN`, else
/// `$CARGO_TARGET_DIR/<profile>/onelog`, else `<workspace>/target/<profile>/onelog`.
pub fn onelog_binary(profile: &str) -> Result<PathBuf> {
    let path = match std::env::var_os("ONELOG_BIN") {
        Some(bin) => PathBuf::from(bin),
        None => target_dir().join(profile).join("onelog"),
    };
    if !path.is_file() {
        bail!(
            "onelog binary not found at {}: run scripts/test.sh, or build it with \
             `cargo build -p broker --features fault-injection` and set ONELOG_BIN",
            path.display()
        );
    }
    Ok(path)
}

fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("target"),
    }
}

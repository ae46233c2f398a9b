//! The status page at the admin port's `/`, as a browser renders it (issue 16's acceptance):
//! headless Chromium (Debian's `chromium`, installed by `scripts/prereqs.sh`) loads the
//! leader's page while a transaction is open, and the rendered DOM must show the leader, the
//! topic and the open transaction; a screenshot is written beside it.
//!
//! `ONELOG_SCREENSHOT=path.png` keeps the screenshot there (docs/OPERATIONS.md's comes from
//! `results/status-page/`); otherwise it goes to the cluster's directory and is checked only.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use harness::kafka::create_topics;
use harness::txn::{send_sync, transactional_producer};
use harness::{Cluster, ClusterOptions};
use rdkafka::producer::Producer;

const TOPIC: &str = "orders";
const TXN_ID: &str = "checkout-txn-open";
const BROWSER_TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_browser_shows_the_leader_a_topic_and_an_open_transaction() {
    let options = ClusterOptions::new(3).config("log.segment.bytes", 1 << 20);
    let mut cluster = Cluster::start_with(options).expect("starting 3 nodes");
    let result = scenario(&mut cluster).await;
    cluster.unwrap_or_dump(result);
}

async fn scenario(cluster: &mut Cluster) -> Result<()> {
    let chromium = chromium()?;
    let leader = cluster.leader()?;
    let bootstrap = cluster.bootstrap();
    create_topics(&bootstrap, &[(TOPIC, 2)]).await?;
    let producer = transactional_producer(&bootstrap, TXN_ID)?;
    producer.begin_transaction().context("begin")?;
    send_sync(&producer, TOPIC, Some(1), "order-1", "2 widgets").await?;

    let url = format!("http://{}/", cluster.admin_addr(leader));
    let profile = cluster.root().join("chromium-profile");
    let dom = run(&chromium, &profile, &["--dump-dom", &url])?;
    ensure!(
        dom.contains(&format!("id=\"leader\">node {leader}<")),
        "the page does not name leader {leader}:\n{dom}"
    );
    ensure!(dom.contains(&format!("<td>{TOPIC}</td>")), "the page does not list topic {TOPIC}:\n{dom}");
    ensure!(
        dom.contains(&format!("<td>{TXN_ID}</td>")),
        "the page does not show the open transaction:\n{dom}"
    );
    ensure!(
        dom.contains(&format!("<td>{TOPIC}/1</td>")),
        "the open transaction's partition is missing:\n{dom}"
    );

    let screenshot = match std::env::var_os("ONELOG_SCREENSHOT") {
        Some(path) => PathBuf::from(path),
        None => cluster.root().join("status-page.png"),
    };
    if let Some(dir) = screenshot.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let arg = format!("--screenshot={}", screenshot.display());
    run(&chromium, &profile, &["--hide-scrollbars", "--window-size=1100,900", &arg, &url])?;
    let png = std::fs::read(&screenshot).with_context(|| format!("reading {}", screenshot.display()))?;
    ensure!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000,
        "{} is not a screenshot",
        screenshot.display()
    );
    println!(
        "status page rendered by {}; screenshot {} ({} bytes)",
        chromium.display(),
        screenshot.display(),
        png.len()
    );

    producer.abort_transaction(Duration::from_secs(30)).context("abort")?;
    Ok(())
}

/// `ONELOG_CHROMIUM`, else `chromium` on the PATH; an error saying how to install it otherwise.
fn chromium() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("ONELOG_CHROMIUM") {
        return Ok(PathBuf::from(path));
    }
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        let candidate = dir.join("chromium");
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    bail!("no chromium on the PATH: scripts/prereqs.sh installs Debian's (apt-get install chromium), or set ONELOG_CHROMIUM")
}

/// One headless Chromium run; its stdout. Root needs `--no-sandbox`; a profile of its own keeps
/// it off any user's. Killed after `BROWSER_TIMEOUT`: a browser stuck on a broken setup must
/// not hang the suite.
fn run(chromium: &Path, profile: &Path, args: &[&str]) -> Result<String> {
    let mut command = Command::new(chromium);
    command.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
    ]);
    command.arg(format!("--user-data-dir={}", profile.display()));
    command.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = command.spawn().with_context(|| format!("starting {}", chromium.display()))?;
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = read(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let stderr = read(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > BROWSER_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            bail!("chromium {args:?} did not finish within {BROWSER_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (stdout, stderr) = (stdout.join().unwrap_or_default(), stderr.join().unwrap_or_default());
    ensure!(status.success(), "chromium {args:?}: {status}\n{stderr}");
    Ok(stdout)
}

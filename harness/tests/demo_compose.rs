//! The container demo's files checked without a Docker engine (issue 16): `docker-compose.yml`
//! parsed as YAML (three brokers that name each other, their ports, volumes and health
//! checks, demos that wait for healthy brokers), every command in it run with `--help` to see
//! that it exists and takes the flags the file gives it, `scripts/demo.sh` running the same
//! demo commands, and the `Dockerfile` (multi-stage, non-root, health check, and binaries the
//! workspace builds).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_yaml_ng::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(file: &str) -> String {
    std::fs::read_to_string(repo().join(file)).unwrap_or_else(|e| panic!("reading {file}: {e}"))
}

fn compose() -> Value {
    serde_yaml_ng::from_str(&read("docker-compose.yml")).expect("docker-compose.yml is YAML")
}

/// A scalar as a string (YAML numbers and booleans included).
fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => panic!("expected a scalar, got {other:?}"),
    }
}

/// A list of scalars (a `command:` or `ports:`); a plain string is split on spaces as
/// compose does for `command: a b c`.
fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::Sequence(items) => items.iter().map(scalar).collect(),
        Value::String(s) => s.split_whitespace().map(str::to_string).collect(),
        Value::Null => Vec::new(),
        other => panic!("expected a list, got {other:?}"),
    }
}

/// `--flag value` and `--flag=value` pairs of a command line, a flag's values in order.
fn flags(args: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        assert!(arg.starts_with("--"), "{arg:?} in {args:?} is no flag");
        if let Some((flag, value)) = arg.split_once('=') {
            out.entry(flag.to_string()).or_default().push(value.to_string());
        } else if args.get(i + 1).is_some_and(|next| !next.starts_with("--")) {
            out.entry(arg.clone()).or_default().push(args[i + 1].clone());
            i += 1;
        } else {
            out.entry(arg.clone()).or_default().push(String::new());
        }
        i += 1;
    }
    out
}

struct Broker {
    service: String,
    node_id: u64,
    flags: BTreeMap<String, Vec<String>>,
    spec: Value,
}

impl Broker {
    fn flag(&self, name: &str) -> &str {
        match self.flags.get(name).map(Vec::as_slice) {
            Some([value]) => value,
            other => panic!("{}: {name} given {other:?}, want exactly once", self.service),
        }
    }
}

fn port(addr: &str) -> u16 {
    addr.rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or_else(|| panic!("{addr:?} is not host:port"))
}

fn host(addr: &str) -> &str {
    addr.rsplit_once(':').map(|(h, _)| h).unwrap_or_else(|| panic!("{addr:?} is not host:port"))
}

fn services(compose: &Value) -> Vec<(String, Value)> {
    let services = compose.get("services").and_then(Value::as_mapping).expect("a services: mapping");
    services.iter().map(|(name, spec)| (scalar(name), spec.clone())).collect()
}

/// The services whose command has `--node-id`, by node id.
fn brokers(compose: &Value) -> BTreeMap<u64, Broker> {
    let mut out = BTreeMap::new();
    for (service, spec) in services(compose) {
        let flags = flags(&strings(spec.get("command").unwrap_or(&Value::Null)));
        let Some(id) = flags.get("--node-id") else { continue };
        let node_id = id[0].parse().unwrap_or_else(|_| panic!("{service}: --node-id {id:?}"));
        let broker = Broker { service: service.clone(), node_id, flags, spec };
        assert!(out.insert(node_id, broker).is_none(), "node id {node_id} twice ({service})");
    }
    out
}

/// The demo services: every service that is not a broker.
fn demos(compose: &Value) -> Vec<(String, Value)> {
    let brokers: BTreeSet<String> = brokers(compose).into_values().map(|b| b.service).collect();
    services(compose).into_iter().filter(|(name, _)| !brokers.contains(name)).collect()
}

#[test]
fn three_brokers_with_distinct_ids_name_each_other_by_service_name() {
    let brokers = brokers(&compose());
    assert_eq!(brokers.keys().copied().collect::<Vec<_>>(), [1, 2, 3], "three brokers, ids 1-3");
    for b in brokers.values() {
        let peers: BTreeMap<u64, (String, String)> = b
            .flag("--peers")
            .split(',')
            .map(|p| {
                let (id, addrs) = p.split_once('=').expect("id=raft@kafka");
                let (raft, kafka) = addrs.split_once('@').expect("id=raft@kafka");
                (id.parse().expect("peer id"), (raft.to_string(), kafka.to_string()))
            })
            .collect();
        let others: Vec<u64> = brokers.keys().copied().filter(|id| *id != b.node_id).collect();
        assert_eq!(peers.keys().copied().collect::<Vec<_>>(), others, "{}: peers", b.service);
        for (id, (raft, kafka)) in &peers {
            let peer = &brokers[id];
            assert_eq!(
                *raft,
                format!("{}:{}", peer.service, port(peer.flag("--raft-listen"))),
                "{}",
                b.service
            );
            assert_eq!(kafka, peer.flag("--advertised-kafka"), "{}: peer {id}'s Kafka address", b.service);
        }
    }
}

/// (host port, container port) of each `ports:` entry.
fn published(spec: &Value) -> Vec<(u16, u16)> {
    strings(spec.get("ports").unwrap_or(&Value::Null))
        .iter()
        .map(|p| {
            let (h, c) = p.rsplit_once(':').unwrap_or_else(|| panic!("port {p:?} is not HOST:CONTAINER"));
            (port(&format!("x:{h}")), c.parse().expect("container port"))
        })
        .collect()
}

#[test]
fn brokers_publish_kafka_where_they_advertise_it_and_their_admin_port() {
    let mut host_ports = BTreeSet::new();
    for b in brokers(&compose()).values() {
        let ports = published(&b.spec);
        let (listen, advertised) = (b.flag("--kafka-listen"), b.flag("--advertised-kafka"));
        assert_eq!(
            host(listen),
            "0.0.0.0",
            "{}: Kafka must bind every interface in its container",
            b.service
        );
        assert_eq!(host(advertised), b.service, "{}: advertised by service name", b.service);
        // A host client follows the advertised address: its port must be the published one.
        assert!(ports.contains(&(port(advertised), port(listen))), "{}: {ports:?} lacks Kafka", b.service);
        let admin = port(b.flag("--admin-listen"));
        assert!(ports.iter().any(|(_, c)| *c == admin), "{}: admin port {admin} not published", b.service);
        assert_eq!(host(b.flag("--raft-listen")), "0.0.0.0", "{}", b.service);
        for (h, _) in ports {
            assert!(host_ports.insert(h), "host port {h} published twice");
        }
    }
}

#[test]
fn each_broker_keeps_its_data_on_its_own_named_volume() {
    let compose = compose();
    let declared = compose.get("volumes").and_then(Value::as_mapping).expect("top-level volumes:");
    let mut used = BTreeSet::new();
    for b in brokers(&compose).values() {
        let mounts = strings(b.spec.get("volumes").unwrap_or(&Value::Null));
        let data_dir = b.flag("--data-dir");
        let volume = mounts
            .iter()
            .find_map(|m| {
                m.split_once(':').filter(|(_, target)| *target == data_dir).map(|(v, _)| v.to_string())
            })
            .unwrap_or_else(|| panic!("{}: nothing mounted at --data-dir {data_dir}: {mounts:?}", b.service));
        assert!(declared.contains_key(volume.as_str()), "{}: {volume} is not a named volume", b.service);
        assert!(used.insert(volume.clone()), "volume {volume} shared by two brokers");
    }
}

/// Every broker reads the same secret file for its Raft handshake (`onelog.cluster.secret.file`
/// through its `ONELOG_*` variable), mounted as a compose secret from a file that exists.
#[test]
fn every_broker_proves_the_same_cluster_secret() {
    let compose = compose();
    let secrets = compose.get("secrets").and_then(Value::as_mapping).expect("top-level secrets:");
    let mut files = BTreeSet::new();
    for b in brokers(&compose).values() {
        let env = b.spec.get("environment").and_then(|e| e.get("ONELOG_CLUSTER_SECRET_FILE"));
        let path = env
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("{}: no ONELOG_CLUSTER_SECRET_FILE", b.service));
        let name = path
            .strip_prefix("/run/secrets/")
            .unwrap_or_else(|| panic!("{}: {path} is no compose secret", b.service));
        let mounted = strings(b.spec.get("secrets").unwrap_or(&Value::Null));
        assert!(mounted.iter().any(|m| m == name), "{}: secret {name} not mounted: {mounted:?}", b.service);
        let file =
            secrets.get(name).and_then(|s| s.get("file")).and_then(Value::as_str).expect("secret file");
        let content = std::fs::read_to_string(repo().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(content.trim().len() >= 16, "{file}: a secret of {} bytes", content.trim().len());
        files.insert(file.to_string());
    }
    assert_eq!(files.len(), 1, "the brokers read different secrets: {files:?}");
}

#[test]
fn each_broker_has_a_healthcheck_on_its_admin_status_and_restarts() {
    for b in brokers(&compose()).values() {
        let test = strings(b.spec.get("healthcheck").and_then(|h| h.get("test")).expect("healthcheck.test"))
            .join(" ");
        let url = format!("http://127.0.0.1:{}/status", port(b.flag("--admin-listen")));
        assert!(
            test.contains("curl") && test.contains(&url),
            "{}: healthcheck {test:?} does not get {url}",
            b.service
        );
        assert_eq!(b.spec.get("restart").map(scalar).as_deref(), Some("unless-stopped"), "{}", b.service);
    }
}

#[test]
fn demos_wait_for_healthy_brokers_and_bootstrap_from_all_three() {
    let compose = compose();
    let brokers = brokers(&compose);
    let advertised: BTreeSet<&str> = brokers.values().map(|b| b.flag("--advertised-kafka")).collect();
    let demos = demos(&compose);
    let names: BTreeSet<&str> = demos.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, BTreeSet::from(["demo-checkout", "demo-pipeline"]));
    for (name, spec) in &demos {
        for b in brokers.values() {
            let condition = spec
                .get("depends_on")
                .and_then(|d| d.get(b.service.as_str()))
                .and_then(|d| d.get("condition"));
            assert_eq!(condition.map(scalar).as_deref(), Some("service_healthy"), "{name} on {}", b.service);
        }
        let command = flags(&strings(spec.get("command").expect("command")));
        let bootstrap: BTreeSet<&str> = command["--bootstrap"][0].split(',').collect();
        assert_eq!(bootstrap, advertised, "{name}: --bootstrap");
    }
}

/// The Dockerfile's instructions, continuation lines joined, comments dropped.
fn dockerfile() -> Vec<(String, String)> {
    let text = read("Dockerfile").replace("\\\n", " ");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (instruction, rest) = l.split_once(char::is_whitespace).unwrap_or((l, ""));
            (instruction.to_uppercase(), rest.trim().to_string())
        })
        .collect()
}

/// The final stage's ENTRYPOINT executable.
fn image_entrypoint() -> String {
    let (_, entrypoint) =
        dockerfile().into_iter().rev().find(|(i, _)| i == "ENTRYPOINT").expect("an ENTRYPOINT");
    let parsed: Vec<String> = serde_json::from_str(&entrypoint).expect("ENTRYPOINT in exec (JSON) form");
    parsed[0].clone()
}

/// The binary a compose executable name stands for, built by this workspace.
fn binary(name: &str) -> PathBuf {
    match name {
        "onelog" => harness::process::onelog_binary("debug").expect("the onelog binary (ONELOG_BIN)"),
        "demo-checkout" => PathBuf::from(env!("CARGO_BIN_EXE_demo-checkout")),
        "demo-pipeline" => PathBuf::from(env!("CARGO_BIN_EXE_demo-pipeline")),
        other => panic!("docker-compose.yml runs {other:?}, which this test does not know"),
    }
}

#[test]
fn every_command_exists_and_takes_the_flags_it_is_given() {
    let entrypoint = image_entrypoint();
    let mut checked = 0;
    for (name, spec) in services(&compose()) {
        let executable = match spec.get("entrypoint") {
            Some(e) => strings(e)[0].clone(),
            None => entrypoint.clone(),
        };
        let output = Command::new(binary(&executable)).arg("--help").output().expect("running --help");
        assert!(output.status.success(), "{name}: {executable} --help failed: {output:?}");
        let help = String::from_utf8_lossy(&output.stdout);
        for flag in flags(&strings(spec.get("command").unwrap_or(&Value::Null))).keys() {
            assert!(help.contains(&format!("{flag} ")), "{name}: {executable} has no {flag}:\n{help}");
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} flags checked");
}

/// `name=(words...)` in scripts/demo.sh.
fn script_array(script: &str, name: &str) -> Vec<String> {
    let line = script
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=(")))
        .unwrap_or_else(|| panic!("scripts/demo.sh has no {name}=(...)"));
    line.trim_end_matches(')').split_whitespace().map(str::to_string).collect()
}

#[test]
fn demo_script_runs_the_compose_demo_commands_and_broker_configs() {
    let compose = compose();
    let script = read("scripts/demo.sh");
    for (service, array) in [("demo-checkout", "checkout_args"), ("demo-pipeline", "pipeline_args")] {
        let spec = compose.get("services").and_then(|s| s.get(service)).expect(service);
        let mut command = flags(&strings(spec.get("command").expect("command")));
        command.remove("--bootstrap"); // the script's cluster is on 127.0.0.1
        assert_eq!(flags(&script_array(&script, array)), command, "{service} in scripts/demo.sh");
    }
    let configs = script
        .lines()
        .find_map(|l| l.strip_prefix("export ONELOG_CONFIGS=\""))
        .expect("ONELOG_CONFIGS in scripts/demo.sh")
        .trim_end_matches('"');
    for b in brokers(&compose).values() {
        assert_eq!(b.flags["--config"].join(" "), configs, "{}: --config flags", b.service);
    }
}

/// The binary targets of the workspace's packages, from `cargo metadata`.
fn workspace_binaries() -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(repo())
        .output()
        .expect("cargo metadata");
    assert!(output.status.success(), "cargo metadata: {}", String::from_utf8_lossy(&output.stderr));
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).expect("metadata JSON");
    let mut bins = BTreeSet::new();
    for target in
        metadata["packages"].as_array().into_iter().flatten().flat_map(|p| p["targets"].as_array()).flatten()
    {
        if target["kind"].as_array().is_some_and(|k| k.iter().any(|k| k == "bin")) {
            bins.insert(target["name"].as_str().expect("target name").to_string());
        }
    }
    bins
}

#[test]
fn dockerfile_is_multi_stage_non_root_healthchecked_and_copies_workspace_binaries() {
    let instructions = dockerfile();
    let froms = instructions.iter().filter(|(i, _)| i == "FROM").count();
    assert!(froms >= 2, "multi-stage: {froms} FROM");
    let last_from = instructions.iter().rposition(|(i, _)| i == "FROM").expect("FROM");
    let (build, runtime) = instructions.split_at(last_from);
    let last = |name: &str| runtime.iter().rev().find(|(i, _)| i == name).map(|(_, rest)| rest.as_str());

    let user = last("USER").expect("a USER in the final stage");
    assert!(!["root", "0"].contains(&user.split(':').next().unwrap_or("")), "USER {user}");
    let healthcheck = last("HEALTHCHECK").expect("a HEALTHCHECK");
    assert!(healthcheck.contains("curl") && healthcheck.contains("/status"), "HEALTHCHECK {healthcheck}");
    assert_eq!(last("VOLUME"), Some("/var/lib/onelog"));

    // Binaries named by `--bin` in the build, and those copied into the final image.
    let built: BTreeSet<String> = build
        .iter()
        .filter(|(i, rest)| i == "RUN" && rest.contains("cargo build"))
        .flat_map(|(_, rest)| {
            let words: Vec<&str> = rest.split_whitespace().collect();
            words.windows(2).filter(|w| w[0] == "--bin").map(|w| w[1].to_string()).collect::<Vec<_>>()
        })
        .collect();
    let copied: BTreeSet<String> = runtime
        .iter()
        .filter(|(i, rest)| i == "COPY" && rest.starts_with("--from="))
        .flat_map(|(_, rest)| {
            let words: Vec<&str> = rest.split_whitespace().skip(1).collect();
            let sources = &words[..words.len() - 1];
            sources.iter().map(|s| s.rsplit('/').next().unwrap_or(s).to_string()).collect::<Vec<_>>()
        })
        .collect();
    let workspace = workspace_binaries();
    assert!(
        !built.is_empty() && built.is_subset(&workspace),
        "built {built:?}, workspace bins {workspace:?}"
    );
    assert_eq!(copied, built, "the final stage copies what was built");
    let entrypoint = image_entrypoint();
    assert!(copied.contains(&entrypoint), "ENTRYPOINT {entrypoint} is not copied in");
    for (name, spec) in demos(&compose()) {
        let executable = strings(spec.get("entrypoint").expect("a demo names its program"))[0].clone();
        assert!(copied.contains(&executable), "{name} runs {executable}, which the image lacks");
    }
    let ignored = read(".dockerignore");
    assert!(ignored.lines().any(|l| l.trim() == "target/"), ".dockerignore keeps target/ out");
}

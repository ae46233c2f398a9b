# Sourced by scripts/compat.sh: installs what each selected client's driver needs into $cache
# (from the registries, pinned, reused across runs) and answers each driver's command line.
# Needs: $repo, $compat, $cache and the `clients` array of the caller.

# confluent-kafka 2.16.1 bundles librdkafka 2.16.0: KIP-848's group.protocol=consumer is GA in
# librdkafka from 2.12 (confluent-kafka-python-consumer needs at least that).
pip_pins=(kafka-python==3.0.12 aiokafka==0.14.0 confluent-kafka==2.16.1
    python-snappy==0.7.3 lz4==4.4.5 zstandard==0.25.0)

install_python() {
    local venv="$cache/venv" stamp
    stamp="$(printf '%s\n' "${pip_pins[@]}")"
    if [ "$(cat "$venv/.pins" 2>/dev/null)" != "$stamp" ]; then
        echo "compat: pip install ${pip_pins[*]}" >&2
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q "${pip_pins[@]}" >&2
        echo "$stamp" >"$venv/.pins"
    fi
}

install_node() {
    local dir="$cache/node"
    if ! cmp -s "$compat/node/package-lock.json" "$dir/package-lock.json" 2>/dev/null; then
        echo "compat: npm ci (kafkajs)" >&2
        mkdir -p "$dir"
        cp "$compat/node/package.json" "$compat/node/package-lock.json" "$dir/"
        (cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts >&2)
    fi
}

install_go() {
    local bin="$cache/go-bin" sum
    sum="$(cat "$compat/go/go.mod" "$compat/go/go.sum" "$compat"/go/cmd/*/*.go "$compat"/go/compat/*.go | sha256sum)"
    if [ "$(cat "$bin/.sum" 2>/dev/null)" != "$sum" ]; then
        echo "compat: go build (franz-go, franz-go-share, sarama)" >&2
        mkdir -p "$bin"
        (cd "$compat/go" && GOFLAGS=-mod=readonly go build -o "$bin/" ./cmd/franz ./cmd/franzshare ./cmd/sarama >&2)
        echo "$sum" >"$bin/.sum"
    fi
}

# ONELOG_COMPAT_RDKAFKA_BIN: a driver built already (CI passes the one scripts/test.sh's
# all-targets build made: building it again here, without the tests' dependency features,
# compiled tokio, rdkafka and the rest a second time).
install_rust() {
    [ -f "$repo/harness/src/bin/compat_rdkafka.rs" ] || return 0 # no driver yet: its cells fail
    [ -z "${ONELOG_COMPAT_RDKAFKA_BIN:-}" ] || return 0
    echo "compat: cargo build -p harness --bin compat_rdkafka" >&2
    # A failed build leaves the driver missing: its cells fail, the other clients still run.
    (cd "$repo" && cargo build -q -p harness --bin compat_rdkafka >&2) || echo "compat: rdkafka driver build failed" >&2
}

# The Java member of confluent-kafka-python-consumer's mixed_group scenario (run.sh
# java-4.4.0-member), built before the drivers run so the build does not eat the scenario's budget.
install_java_member() {
    echo "compat: building the java-4.4.0 member (mixed_group)" >&2
    COMPAT_BUILD_ONLY=1 "$compat/java/run.sh" java-4.4.0-member >&2 || echo "compat: java member build failed" >&2
}

# Each JVM client's driver built into the cache now rather than at its first run (`--install-only`:
# CI fills the caches while its test suite runs). A failure here is only reported: the driver's
# own run builds again and fails its cells.
install_java_drivers() {
    local c
    for c in "${clients[@]}"; do
        case "$c" in
            java-* | kafka-streams-* | kafka-cli-*)
                COMPAT_BUILD_ONLY=1 "$compat/java/run.sh" "${c%-streams}" >&2 ||
                    echo "compat: building the $c driver failed" >&2 ;;
        esac
    done
}

install_for_clients() {
    local c need_py=0 need_node=0 need_go=0 need_rust=0 need_member=0
    for c in "${clients[@]}"; do
        case "$c" in
            kafka-python | aiokafka | confluent-kafka-python | confluent-kafka-python-share) need_py=1 ;;
            confluent-kafka-python-consumer) need_py=1 need_member=1 ;;
            kafkajs) need_node=1 ;;
            franz-go | sarama | franz-go-consumer | franz-go-share) need_go=1 ;;
            rdkafka-rust) need_rust=1 ;;
        esac
    done
    [ "$need_py" = 0 ] || install_python
    [ "$need_node" = 0 ] || install_node
    [ "$need_go" = 0 ] || install_go
    [ "$need_rust" = 0 ] || install_rust
    [ "$need_member" = 0 ] || install_java_member
}

# The command that runs one client's driver, or nothing when the driver does not exist. A
# *-consumer id is its base driver with COMPAT_GROUP_PROTOCOL=consumer (every group consumer on
# the KIP-848 protocol); the JVM's run.sh knows java-4.4.0-consumer itself.
driver_command() {
    local target="${CARGO_TARGET_DIR:-$repo/target}"
    case "$1" in
        confluent-kafka-python-consumer | franz-go-consumer)
            local base
            base="$(driver_command "${1%-consumer}")"
            [ -n "$base" ] && echo "COMPAT_GROUP_PROTOCOL=consumer $base"
            return 0 ;;
        java-* | kafka-streams-* | kafka-cli-*)
            [ -x "$compat/java/run.sh" ] && echo "'$compat/java/run.sh' '$1'" ;;
        kafka-python) echo "'$cache/venv/bin/python' '$compat/python/kafka_python_driver.py'" ;;
        aiokafka) echo "'$cache/venv/bin/python' '$compat/python/aiokafka_driver.py'" ;;
        confluent-kafka-python) echo "'$cache/venv/bin/python' '$compat/python/confluent_driver.py'" ;;
        confluent-kafka-python-share) echo "'$cache/venv/bin/python' '$compat/python/confluent_share_driver.py'" ;;
        kafkajs) echo "NODE_PATH='$cache/node/node_modules' node '$compat/node/kafkajs_driver.js'" ;;
        franz-go) echo "'$cache/go-bin/franz'" ;;
        franz-go-share) echo "'$cache/go-bin/franzshare'" ;;
        sarama) echo "'$cache/go-bin/sarama'" ;;
        rdkafka-rust)
            local bin="${ONELOG_COMPAT_RDKAFKA_BIN:-$target/debug/compat_rdkafka}"
            [ -x "$bin" ] && echo "'$bin'" ;;
    esac
    return 0
}

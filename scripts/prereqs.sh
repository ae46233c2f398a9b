#!/usr/bin/env bash
# Installs what building onelog and running its tests need, when missing (Debian packages via
# apt-get, sudo when not root; rustfmt and clippy via rustup): the README's test command
# (scripts/test.sh) and CI (.ci/run) both start here, so a brand-new machine needs nothing else.
set -euo pipefail

# rdkafka builds a bundled librdkafka (./configure + make, C and C++), zlib through libz-sys
# and zstd through zstd-sys.
missing=()
command -v cc >/dev/null 2>&1 || missing+=(gcc)
command -v c++ >/dev/null 2>&1 || missing+=(g++)
command -v make >/dev/null 2>&1 || missing+=(make)
command -v perl >/dev/null 2>&1 || missing+=(perl)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
if ! { [ -e /usr/include/zlib.h ] || pkg-config --exists zlib 2>/dev/null; }; then
    missing+=(zlib1g-dev)
fi
# The harness's librdkafka is built with TLS (SSL and SASL_SSL listener tests): OpenSSL's
# headers through openssl-sys.
if ! { [ -e /usr/include/openssl/ssl.h ] || pkg-config --exists openssl 2>/dev/null; }; then
    missing+=(libssl-dev)
fi
# The Java scenario drivers (harness/java): Maven fetches kafka-clients and kafka-tools.
command -v mvn >/dev/null 2>&1 || missing+=(maven)
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
# bench-compare.sh installs matplotlib into a venv for its plots; compat.sh the Python clients.
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
# The compatibility matrix's Go (franz-go, sarama) and Node (kafkajs) drivers, and franz-go's
# own suite (kgo-suite.sh); curl for cluster.sh's admin API calls.
command -v go >/dev/null 2>&1 || missing+=(golang-go)
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v curl >/dev/null 2>&1 || missing+=(curl)
# The status page test renders the admin API's page in headless Chromium.
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if [ "${#missing[@]}" -gt 0 ]; then
    echo "installing build prerequisites: ${missing[*]}"
    sudo=()
    if [ "$(id -u)" -ne 0 ]; then sudo=(sudo); fi
    "${sudo[@]}" apt-get update
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi

if command -v rustup >/dev/null 2>&1; then
    rustup component list --installed | grep -q '^rustfmt' || rustup component add rustfmt
    rustup component list --installed | grep -q '^clippy' || rustup component add clippy
fi

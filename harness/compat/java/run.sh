#!/usr/bin/env bash
# The JVM drivers of the compatibility matrix (harness/compat/, issue 12).
#
#   harness/compat/java/run.sh CLIENT_ID [ARG...]   (ARGs go to the main class after the id)
#
# CLIENT_ID: java-4.4.0, java-3.9.1, java-2.8.2 (dev.onelog.compat.clients.ClientsDriver built
# against that kafka-clients version), java-4.4.0-consumer (the same 4.4.0 driver with
# COMPAT_GROUP_PROTOCOL=consumer: every group consumer uses the KIP-848 protocol),
# java-4.4.0-member (dev.onelog.compat.clients.GroupMember: one consumer-protocol group member
# driven over stdin/stdout, the Java half of the confluent driver's mixed_group scenario),
# java-4.4.0-share (dev.onelog.compat.share.ShareDriver, the 4.4.0 build: KIP-932 share groups with
# KafkaShareConsumer; its sources are in src/share/java, which only the 4.4.0 builds compile),
# kafka-streams-4.4.0 (dev.onelog.compat.streams) or kafka-cli-4.4.0 (dev.onelog.compat.cli: the
# Kafka 4.4.0 command-line tools from the Maven jars). COMPAT_BUILD_ONLY=1 builds and exits.
# Environment: COMPAT_BOOTSTRAP, COMPAT_KILL_LEADER, COMPAT_PREFIX, COMPAT_TIMEOUT_S (see the
# contract in harness/compat/). stdout carries one JSON line per scenario; everything else,
# Maven included, goes to stderr.
#
# Each variant is built once into ${ONELOG_COMPAT_CACHE:-$HOME/.cache/onelog-compat}/java/VARIANT
# (outside the clone) and rebuilt only when pom.xml, src/ or this script change. One JVM runs
# every scenario of a client id (the Streams driver starts the Streams app in child JVMs, as it
# must kill -9 it).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
client="${1:?usage: run.sh CLIENT_ID [ARG...]}"
shift
cache="${ONELOG_COMPAT_CACHE:-$HOME/.cache/onelog-compat}/java"

case "$client" in
    java-4.4.0 | java-3.9.1 | java-2.8.2 | java-4.4.0-consumer | java-4.4.0-member)
        version="${client#java-}"
        version="${version%-consumer}"
        version="${version%-member}"
        variant="clients-$version"
        maven_args=("-Dkafka.version=$version")
        main=dev.onelog.compat.clients.ClientsDriver
        case "$client" in
            *-consumer) export COMPAT_GROUP_PROTOCOL="${COMPAT_GROUP_PROTOCOL:-consumer}" ;;
            *-member) export COMPAT_GROUP_PROTOCOL="${COMPAT_GROUP_PROTOCOL:-consumer}"
                main=dev.onelog.compat.clients.GroupMember ;;
        esac ;;
    java-4.4.0-share)
        variant=clients-4.4.0
        maven_args=(-Dkafka.version=4.4.0)
        main=dev.onelog.compat.share.ShareDriver ;;
    kafka-streams-4.4.0)
        variant=tools-4.4.0
        maven_args=(-Dkafka.version=4.4.0 -Dcompat.tools)
        main=dev.onelog.compat.streams.StreamsDriver ;;
    kafka-cli-4.4.0)
        variant=tools-4.4.0
        maven_args=(-Dkafka.version=4.4.0 -Dcompat.tools)
        main=dev.onelog.compat.cli.CliDriver ;;
    *) echo "run.sh: unknown client id '$client'" >&2; exit 2 ;;
esac

for tool in mvn java sha256sum flock; do
    command -v "$tool" >/dev/null 2>&1 || { echo "run.sh: $tool not found" >&2; exit 1; }
done

build_dir="$cache/$variant"
classpath_file="$build_dir/classpath"
mkdir -p "$build_dir"

# The sources' fingerprint: what the cached build was made from.
fingerprint() {
    (cd "$here" && find pom.xml run.sh src -type f -print0 | sort -z | xargs -0 sha256sum
        printf '%s\n' "${maven_args[@]}") | sha256sum | cut -d' ' -f1
}

build() {
    local want
    want="$(fingerprint)"
    if [ -f "$classpath_file" ] && [ "$(cat "$build_dir/fingerprint" 2>/dev/null)" = "$want" ]; then
        return
    fi
    echo "run.sh: building $variant into $build_dir" >&2
    # Debian's Maven 3.8 prints colour resets even in batch mode; they are stripped.
    if ! (cd "$here" && mvn -q -B "${maven_args[@]}" "-Dcompat.build.dir=$build_dir/target" \
        package dependency:build-classpath "-Dmdep.outputFile=$build_dir/deps.classpath") 2>&1 |
        sed 's/\x1b\[[0-9;]*m//g' >&2; then
        echo "run.sh: building $variant failed" >&2
        exit 1
    fi
    printf '%s:%s\n' "$build_dir/target/onelog-compat-java-0.1.0.jar" "$(cat "$build_dir/deps.classpath")" \
        >"$classpath_file.tmp"
    mv "$classpath_file.tmp" "$classpath_file"
    echo "$want" >"$build_dir/fingerprint"
}

# One build at a time per variant, should two runs start together.
exec 9>"$build_dir/lock"
flock 9
build
flock -u 9
[ "${COMPAT_BUILD_ONLY:-0}" = 1 ] && exit 0

exec java -Xmx768m -XX:+UseSerialGC -cp "$(cat "$classpath_file")" "$main" "$client" "$@"

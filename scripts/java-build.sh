#!/usr/bin/env bash
# Builds the Java scenario drivers (harness/java, stock Apache Kafka clients and tools from
# Maven Central) and writes their classpath, the module jar then every dependency jar, to
# harness/java/target/classpath. Prints that file's path. The Rust tests read the classpath
# from ONELOG_JAVA_CLASSPATH (scripts/test.sh exports it).
#
# Extra arguments go to Maven, e.g. `scripts/java-build.sh -Dkafka.version=4.0.0`. Nothing is
# rebuilt when the classpath file is newer than the pom and every source and the arguments
# are the same as last time.
#
# `--variant NAME` (first) builds another client version beside the default one, in its own
# build directory target/NAME, and writes target/classpath-NAME; the default build's jar and
# classpath are left alone. scripts/test.sh builds
# `scripts/java-build.sh --variant kafka3 -Dkafka.version=3.9.1` for ONELOG_JAVA3_CLASSPATH;
# scripts/bench-java.sh builds `--variant kafka2 -Dkafka2` (kafka-clients 2.8.2, no kafka-tools).
set -euo pipefail
cd "$(dirname "$0")/../harness/java"

build_dir=target
out=target/classpath
if [ "${1:-}" = "--variant" ]; then
    [ -n "${2:-}" ] || { echo "java-build: --variant needs a name" >&2; exit 1; }
    case "$2" in
        *[!A-Za-z0-9_-]*) echo "java-build: variant name '$2': letters, digits, - and _ only" >&2; exit 1 ;;
    esac
    build_dir="target/$2"
    out="target/classpath-$2"
    shift 2
    set -- "-Donelog.build.dir=$PWD/$build_dir" "$@"
fi
stamp="$out.args"
jar="$build_dir/onelog-java-it-0.1.0.jar"
deps="$build_dir/deps.classpath"

if [ -f "$out" ] && [ -f "$jar" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$*" ] &&
    [ -z "$(find pom.xml src -newer "$out" -print -quit)" ]; then
    echo "$PWD/$out"
    exit 0
fi

for tool in mvn java; do
    command -v "$tool" >/dev/null 2>&1 || { echo "java-build: $tool not found (apt-get install maven openjdk-17-jdk-headless)" >&2; exit 1; }
done

# Debian's Maven 3.8 prints colour resets even in batch mode; they are stripped.
mvn -q -B "$@" package dependency:build-classpath -Dmdep.outputFile="$PWD/$deps" 2>&1 |
    sed 's/\x1b\[[0-9;]*m//g' >&2
mkdir -p target
printf '%s:%s\n' "$PWD/$jar" "$(cat "$deps")" > "$out.tmp"
mv "$out.tmp" "$out"
printf '%s' "$*" > "$stamp"
echo "$PWD/$out"

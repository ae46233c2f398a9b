#!/usr/bin/env bash
# Builds the Java scenario drivers (harness/java, stock Apache Kafka clients and tools from
# Maven Central) and writes their classpath, the module jar then every dependency jar, to
# harness/java/target/classpath. Prints that file's path. The Rust tests read the classpath
# from ONELOG_JAVA_CLASSPATH (scripts/test.sh exports it).
#
# Extra arguments go to Maven, e.g. `scripts/java-build.sh -Dkafka.version=4.0.0`. Nothing is
# rebuilt when the classpath file is newer than the pom and every source and the arguments
# are the same as last time.
set -euo pipefail
cd "$(dirname "$0")/../harness/java"

out=target/classpath
stamp=target/classpath.args
jar=target/onelog-java-it-0.1.0.jar

if [ -f "$out" ] && [ -f "$jar" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$*" ] &&
    [ -z "$(find pom.xml src -newer "$out" -print -quit)" ]; then
    echo "$PWD/$out"
    exit 0
fi

for tool in mvn java; do
    command -v "$tool" >/dev/null 2>&1 || { echo "java-build: $tool not found (apt-get install maven openjdk-17-jdk-headless)" >&2; exit 1; }
done

# Debian's Maven 3.8 prints colour resets even in batch mode; they are stripped.
mvn -q -B "$@" package dependency:build-classpath -Dmdep.outputFile="$PWD/target/deps.classpath" 2>&1 |
    sed 's/\x1b\[[0-9;]*m//g' >&2
printf '%s:%s\n' "$PWD/$jar" "$(cat target/deps.classpath)" > "$out.tmp"
mv "$out.tmp" "$out"
printf '%s' "$*" > "$stamp"
echo "$PWD/$out"

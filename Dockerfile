# onelog's container image: the broker (`onelog`, the ENTRYPOINT) and the two demo programs
# (`demo-checkout`, `demo-pipeline`), as docker-compose.yml runs them.
#
#   docker build -t onelog:demo .
#   docker run -p 9092:9092 -p 9292:9292 onelog:demo      # a one-node cluster on localhost:9092
#
# Stage 1 builds release binaries; librdkafka (the demos' Kafka client) is built from the
# source rdkafka bundles, which needs a C/C++ toolchain, make, perl, pkg-config, zlib and
# OpenSSL's headers (the harness builds it with TLS).
FROM rust:1-bookworm AS builder
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc g++ make perl pkg-config zlib1g-dev libssl-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# The cache mounts keep the registry and the target directory between builds; the binaries
# are copied out of the cached target directory, which is not part of the layer.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p broker -p harness \
        --bin onelog --bin demo-checkout --bin demo-pipeline \
    && mkdir -p /out \
    && cp target/release/onelog target/release/demo-checkout target/release/demo-pipeline /out/

# Stage 2: only the binaries, curl for the health check, CA certificates and OpenSSL (the
# demo programs' librdkafka links it).
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl libssl3 \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system onelog \
    && useradd --system --gid onelog --home-dir /var/lib/onelog --shell /usr/sbin/nologin onelog \
    && mkdir -p /var/lib/onelog \
    && chown onelog:onelog /var/lib/onelog
COPY --from=builder /out/onelog /out/demo-checkout /out/demo-pipeline /usr/local/bin/
USER onelog
WORKDIR /var/lib/onelog
# The Raft log, checkpoints and segments; a new named volume takes this directory's owner.
VOLUME /var/lib/onelog
# Kafka, Raft and the admin API of the default command below; docker-compose.yml gives each
# broker its own three (19092/19192/19292 for node 1, and so on).
EXPOSE 9092 9192 9292
# Healthy once the admin API answers /status and names a leader; compose files that move the
# admin port give their own healthcheck.
HEALTHCHECK --interval=5s --timeout=3s --start-period=30s --retries=5 \
    CMD curl -fsS http://127.0.0.1:9292/status | grep -Eq '"leader": *[0-9]' || exit 1
ENTRYPOINT ["onelog"]
CMD ["--data-dir", "/var/lib/onelog", "--kafka-listen", "0.0.0.0:9092", "--advertised-kafka", "localhost:9092", "--admin-listen", "0.0.0.0:9292"]

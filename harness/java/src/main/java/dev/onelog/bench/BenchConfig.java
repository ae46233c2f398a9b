// The benches' settings, all from the environment as in the suite the benches follow:
//
//   KAFKA_CONNECTION  bootstrap servers (required)
//   WARMUP            iterations run first and not recorded (required)
//   TXES              iterations recorded (required)
//   MEASURES          file for the recorded latencies, one per line in nanoseconds, sorted
//                     ascending (stdout when unset)
//
// Beyond the original suite (none of them set means the original behaviour):
//
//   PRODUCERS         concurrent workers, each with its own producer (and transactional id
//                     TX_ID-<i>, consumer group GROUP-<i>); each runs WARMUP then TXES iterations
//   PAYLOAD_BYTES     size of every record value (default: the iteration number as text)
//   SUMMARY=json      print a one-line JSON summary (throughput and percentiles) to stderr;
//                     implied by PRODUCERS, PAYLOAD_BYTES and SUMMARY_FILE
//   SUMMARY_FILE      write that summary line to this file instead of stderr
//   TX_ID, GROUP      transactional id and consumer group (defaults per bench)
//   CLIENT_CONFIG     extra client configs for every client, "k=v,k=v" (e.g.
//                     enable.idempotence=false), applied last
package dev.onelog.bench;

import java.util.Properties;

final class BenchConfig {
    final String bootstrap;
    final int warmup;
    final int txes;
    final String measures;
    final int producers;
    final boolean concurrent;
    /** Record value size in bytes; -1 for the original's short textual value. */
    final int payloadBytes;
    final boolean summary;
    final String summaryFile;
    final String txId;
    final String group;
    private final Properties extra = new Properties();

    BenchConfig(String defaultTxId, String defaultGroup) {
        bootstrap = required("KAFKA_CONNECTION");
        warmup = Integer.parseInt(required("WARMUP"));
        txes = Integer.parseInt(required("TXES"));
        measures = System.getenv("MEASURES");
        String producersEnv = System.getenv("PRODUCERS");
        concurrent = producersEnv != null;
        producers = concurrent ? Integer.parseInt(producersEnv) : 1;
        String payloadEnv = System.getenv("PAYLOAD_BYTES");
        payloadBytes = payloadEnv == null ? -1 : Integer.parseInt(payloadEnv);
        summaryFile = System.getenv("SUMMARY_FILE");
        summary = "json".equals(System.getenv("SUMMARY")) || concurrent || payloadEnv != null
            || summaryFile != null;
        txId = env("TX_ID", defaultTxId);
        group = env("GROUP", defaultGroup);
        String clientConfig = env("CLIENT_CONFIG", "");
        for (String pair : clientConfig.split(",")) {
            if (pair.isBlank()) {
                continue;
            }
            int eq = pair.indexOf('=');
            if (eq < 0) {
                throw new IllegalArgumentException("CLIENT_CONFIG: expected k=v, got " + pair);
            }
            extra.setProperty(pair.substring(0, eq).trim(), pair.substring(eq + 1).trim());
        }
        if (warmup < 0 || txes <= 0 || producers <= 0 || payloadBytes < -1) {
            throw new IllegalArgumentException("need WARMUP >= 0, TXES > 0, PRODUCERS > 0, PAYLOAD_BYTES >= 0");
        }
    }

    /** Iterations each worker runs, warm-up included. */
    int iterations() {
        return warmup + txes;
    }

    /** Worker i's transactional id: TX_ID itself unless PRODUCERS is set. */
    String txId(int worker) {
        return concurrent ? txId + "-" + worker : txId;
    }

    /** Worker i's consumer group: GROUP itself unless PRODUCERS is set. */
    String group(int worker) {
        return concurrent ? group + "-" + worker : group;
    }

    /** bootstrap.servers, then `defaults`, then CLIENT_CONFIG. */
    Properties clientConfig(Properties defaults) {
        Properties props = new Properties();
        props.setProperty("bootstrap.servers", bootstrap);
        props.putAll(defaults);
        props.putAll(extra);
        return props;
    }

    private static String required(String name) {
        String value = System.getenv(name);
        if (value == null || value.isEmpty()) {
            throw new IllegalArgumentException("environment variable " + name + " is required");
        }
        return value;
    }

    private static String env(String name, String fallback) {
        String value = System.getenv(name);
        return value == null || value.isEmpty() ? fallback : value;
    }
}

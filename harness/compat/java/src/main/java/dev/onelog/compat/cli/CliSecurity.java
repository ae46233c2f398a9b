// The security suite (COMPAT_SUITE=security, scripts/security-accept.sh) with Kafka's command-line
// tools, connected the way an operator connects them: a client properties file written from the
// environment (dev.onelog.compat.Security) and given as --producer.config, --consumer.config or
// --command-config. Transactions come from kafka-producer-perf-test --transactional-id, whose
// records all carry one payload line, so this run's records can be counted in the shared topic.
package dev.onelog.compat.cli;

import static dev.onelog.compat.Compat.check;

import dev.onelog.compat.Compat;
import dev.onelog.compat.Security;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Collectors;

final class CliSecurity {
    private final Compat compat;
    private final String topic = env("COMPAT_SEC_TOPIC", "sec-topic");
    private final String txnAllowed = env("COMPAT_SEC_TXN_ALLOWED", "txn-a");
    private final String txnDenied = env("COMPAT_SEC_TXN_DENIED", "txn-b");
    private final Path config;

    CliSecurity(Compat compat) throws java.io.IOException {
        this.compat = compat;
        this.config = write(Security.fromEnv());
    }

    private static String env(String name, String fallback) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? fallback : v;
    }

    private static Path write(Security security) throws java.io.IOException {
        Path f = Files.createTempFile("compat-client", ".properties");
        f.toFile().deleteOnExit();
        Files.writeString(f, security.propertiesFile());
        return f;
    }

    void runAll() {
        compat.run("sec_produce_consume", this::produceConsume);
        compat.run("sec_txn_allowed", this::txnAllowed);
        compat.run("sec_txn_denied", this::txnDenied);
        compat.run("sec_bad_credentials", this::badCredentials);
    }

    private Tool.Result tool(String main, String stdin, String... args) throws Exception {
        String[] all = new String[args.length + 2];
        all[0] = "--bootstrap-server";
        all[1] = compat.bootstrap;
        System.arraycopy(args, 0, all, 2, args.length);
        return Tool.run(main, stdin, all);
    }

    /** This run's lines in the topic: kafka-console-consumer from the beginning until it idles. */
    private List<String> ours(String tag, String isolation, String group) throws Exception {
        Tool.Result r = tool(CliDriver.CONSOLE_CONSUMER, "", "--topic", topic, "--from-beginning", "--timeout-ms", "8000",
                "--isolation-level", isolation, "--group", group, "--consumer.config", config.toString());
        check(r.err().contains("Processed a total of"), "kafka-console-consumer: " + r);
        return r.out().lines().map(String::strip).filter(l -> l.startsWith(tag)).collect(Collectors.toList());
    }

    String produceConsume() throws Exception {
        String tag = compat.prefix + "-pc-";
        String input = tag + "0\n" + tag + "1\n" + tag + "2\n";
        Tool.Result p = tool(CliDriver.CONSOLE_PRODUCER, input, "--topic", topic, "--producer.config", config.toString());
        check(p.code() == 0, "kafka-console-producer: " + p);
        String group = compat.prefix + "-g";
        List<String> got = ours(tag, "read_uncommitted", group);
        check(got.equals(input.lines().collect(Collectors.toList())), "kafka-console-consumer read " + got);
        return "3 lines through kafka-console-producer read back by kafka-console-consumer in group " + group
                + " (--producer.config/--consumer.config)";
    }

    /** kafka-producer-perf-test: `records` records of the payload `value` in one transaction. */
    private Tool.Result perfTest(String txnId, String value) throws Exception {
        Path payload = Files.createTempFile("compat-payload", ".txt");
        payload.toFile().deleteOnExit();
        Files.writeString(payload, value + "\n");
        return Tool.run(CliDriver.PRODUCER_PERF, "", "--topic", topic, "--num-records", "3", "--throughput", "-1",
                "--payload-file", payload.toString(), "--transactional-id", txnId, "--transaction-duration-ms", "60000",
                "--producer.config", config.toString(), "--producer-props", "bootstrap.servers=" + compat.bootstrap,
                "acks=all", "max.block.ms=20000");
    }

    String txnAllowed() throws Exception {
        String value = compat.prefix + "-txa";
        Tool.Result r = perfTest(txnAllowed, value);
        check(r.code() == 0 && r.out().contains("3 records sent"), "kafka-producer-perf-test: " + r);
        List<String> got = ours(value, "read_committed", compat.prefix + "-g-committed");
        check(got.size() == 3, "read_committed read " + got.size() + " of 3 records: " + got);
        return "kafka-producer-perf-test --transactional-id " + txnAllowed + ": 3 records committed, read_committed reads 3";
    }

    String txnDenied() throws Exception {
        String value = compat.prefix + "-txb";
        Tool.Result r = perfTest(txnDenied, value);
        String all = r.out() + r.err();
        check(all.contains("TransactionalIdAuthorizationException"), "kafka-producer-perf-test with " + txnDenied + ": " + r);
        List<String> got = ours(value, "read_uncommitted", compat.prefix + "-g-uncommitted");
        check(got.isEmpty(), "read_uncommitted sees records of the denied transaction: " + got);
        return "kafka-producer-perf-test --transactional-id " + txnDenied + ": TransactionalIdAuthorizationException (exit "
                + r.code() + "); read_uncommitted sees none of it";
    }

    String badCredentials() throws Exception {
        Security bad = Security.fromEnv();
        String what;
        if (bad.sasl()) {
            bad = bad.withPassword("not-the-password");
            what = "a wrong SASL password";
        } else if (bad.tls()) {
            bad = bad.withoutClientCertificate();
            what = "no client certificate";
        } else {
            throw new Compat.NotExpressible("PLAINTEXT has no credentials");
        }
        Tool.Result r = tool(CliDriver.TOPICS, "", "--list", "--command-config", write(bad).toString());
        String all = r.out() + r.err();
        check(r.code() != 0, "kafka-topics --list with " + what + " succeeded: " + r);
        check(all.contains("AuthenticationException"), "kafka-topics --list with " + what + ": " + r);
        return "kafka-topics --list with " + what + ": exit " + r.code() + ", "
                + (all.contains("SaslAuthenticationException") ? "SaslAuthenticationException" : "SslAuthenticationException");
    }
}

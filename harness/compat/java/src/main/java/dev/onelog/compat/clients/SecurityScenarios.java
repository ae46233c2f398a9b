// The security acceptance's scenarios (issue #15, scripts/security-accept.sh), run instead of the
// matrix when COMPAT_SUITE=security, as the principal the connection settings name (Security):
// produce and consume through a group, a transaction with the allowed transactional id, one with
// the denied id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, nothing of it in the log), and a
// connection with bad credentials (a wrong SASL password, or no client certificate on SSL).
// The runner creates COMPAT_SEC_TOPIC (one partition) and the ACLs; every record carries
// COMPAT_PREFIX, so the clients sharing the topic read only their own.
package dev.onelog.compat.clients;

import static dev.onelog.compat.Compat.check;

import dev.onelog.compat.Compat;
import dev.onelog.compat.Kit;
import dev.onelog.compat.Security;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.TransactionalIdAuthorizationException;

public final class SecurityScenarios {
    private static final Duration READ_TIMEOUT = Duration.ofSeconds(30);
    private final Compat compat;
    private final Kit kit;
    private final String topic = env("COMPAT_SEC_TOPIC", "sec-topic");
    private final String txnAllowed = env("COMPAT_SEC_TXN_ALLOWED", "txn-a");
    private final String txnDenied = env("COMPAT_SEC_TXN_DENIED", "txn-b");

    public SecurityScenarios(Compat compat, Kit kit) {
        this.compat = compat;
        this.kit = kit;
    }

    private static String env(String name, String fallback) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? fallback : v;
    }

    public void runAll() {
        compat.run("sec_produce_consume", this::produceConsume);
        compat.run("sec_txn_allowed", this::txnAllowed);
        compat.run("sec_txn_denied", this::txnDenied);
        compat.run("sec_bad_credentials", this::badCredentials);
    }

    /** This run's records in the topic, read from the beginning without a group. */
    private List<String> ours(String isolation, String tag) {
        return Kit.values(kit.readAll(topic, 1, isolation, READ_TIMEOUT)).stream()
                .filter(v -> v.startsWith(tag)).collect(Collectors.toList());
    }

    String produceConsume() throws Exception {
        String tag = compat.prefix + "-pc-";
        List<String> want = Kit.numbered(tag, 5);
        try (KafkaProducer<String, String> p = kit.producer()) {
            Kit.sendAll(p, topic, want);
        }
        // Through a group of the allowed prefix: FindCoordinator, JoinGroup, OffsetCommit.
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<String, String> c = kit.consumer("group.id", compat.prefix + "-g")) {
            c.subscribe(List.of(topic));
            long deadline = System.nanoTime() + READ_TIMEOUT.toNanos();
            while (got.size() < want.size()) {
                check(System.nanoTime() < deadline, "group consumer read " + got + " of " + want);
                for (ConsumerRecord<String, String> r : c.poll(Kit.POLL)) if (r.value().startsWith(tag)) got.add(r.value());
            }
            c.commitSync();
        }
        check(got.equals(want), "group consumer read " + got + ", want " + want);
        return "5 records produced and read back through group " + compat.prefix + "-g, offsets committed";
    }

    String txnAllowed() throws Exception {
        String tag = compat.prefix + "-txa-";
        List<String> want = Kit.numbered(tag, 3);
        try (KafkaProducer<String, String> p = kit.producer("transactional.id", txnAllowed)) {
            p.initTransactions();
            p.beginTransaction();
            Kit.sendAll(p, topic, want);
            p.commitTransaction();
        }
        List<String> got = ours("read_committed", tag);
        check(got.equals(want), "read_committed read " + got + ", want " + want);
        return "transaction with " + txnAllowed + " committed; read_committed reads its 3 records";
    }

    String txnDenied() throws Exception {
        String tag = compat.prefix + "-txb-";
        try (KafkaProducer<String, String> p = kit.producer("transactional.id", txnDenied)) {
            try {
                p.initTransactions();
                p.beginTransaction();
                Kit.sendAll(p, topic, Kit.numbered(tag, 3));
                p.commitTransaction();
                throw new AssertionError("the transaction with " + txnDenied + " committed");
            } catch (Exception e) {
                check(Kit.causedBy(e, TransactionalIdAuthorizationException.class),
                        "want TransactionalIdAuthorizationException, got " + Compat.describe(e));
            }
        }
        List<String> got = ours("read_uncommitted", tag);
        check(got.isEmpty(), "read_uncommitted sees records of the denied transaction: " + got);
        return "initTransactions with " + txnDenied + ": TransactionalIdAuthorizationException; read_uncommitted sees none of it";
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
        try (Admin admin = new Kit(compat.bootstrap, bad).admin()) {
            try {
                admin.describeCluster().nodes().get(20, TimeUnit.SECONDS);
                throw new AssertionError("describeCluster with " + what + " succeeded");
            } catch (java.util.concurrent.ExecutionException e) {
                check(Kit.causedBy(e, AuthenticationException.class),
                        "want an AuthenticationException, got " + Compat.describe(e));
                return what + ": " + e.getCause().getClass().getSimpleName();
            }
        }
    }
}

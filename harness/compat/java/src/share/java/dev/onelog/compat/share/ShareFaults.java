// The share-group scenarios with a fault: a member kill -9ed while it holds acquired records
// (another member must get every one of them again), and the broker the share partitions depend
// on killed -9 while a consumer accepts records (COMPAT_KILL_LEADER: on onelog the Raft leader,
// on Kafka the leader of the topic's partition 0, harness/compat/kafka_probe.py): every record
// must end accepted exactly once, none lost.
package dev.onelog.compat.share;

import static dev.onelog.compat.Compat.check;
import static dev.onelog.compat.share.ShareKit.sample;

import dev.onelog.compat.Compat;
import dev.onelog.compat.Kit;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;

final class ShareFaults {
    private static final Duration WAIT = Duration.ofSeconds(40);
    private final Compat compat;
    private final Kit kit;
    private final ShareKit share;

    ShareFaults(Compat compat, ShareKit share) {
        this.compat = compat;
        this.kit = share.kit();
        this.share = share;
    }

    /**
     * 20 records on one partition; a share consumer in a child JVM (ShareMember, explicit mode,
     * at most 5 records acquired) acquires some and holds them, then is killed -9 (its connection
     * dies with it; its member stays in the group until the session timeout). A second consumer
     * (explicit ACCEPT, commitSync after every poll) must then get every record: the held ones
     * again with a delivery count of at least 2, the others with 1; every accept confirmed, each
     * record accepted exactly once, nothing more in a further poll round, and the group's offsets
     * showing every record acknowledged. The group's lock duration is the minimum, 15 s, so a
     * broker that releases the locks only when they run out still passes in time; the detail says
     * how long it took (Kafka 4.4 releases them when the dead member's connection closes, and
     * counts that delivery: the held records come back with delivery count 2).
     */
    String memberKill() throws Exception {
        String topic = compat.prefix + "-share-member-kill";
        String group = topic + "-g";
        share.groupConfigs(group, "share.auto.offset.reset", "earliest",
                "share.record.lock.duration.ms", String.valueOf(ShareKit.MIN_LOCK_MS));
        List<String> values = Kit.numbered("mk", 20);
        kit.createTopic(topic, 1, values);
        List<String> command = List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", System.getProperty("java.class.path"),
                ShareMember.class.getName(), compat.client + "-member", topic, group, "5");
        Process child = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        Map<String, Short> held = new TreeMap<>();
        long killedAt;
        try {
            LinkedBlockingQueue<String> lines = new LinkedBlockingQueue<>();
            Thread reader = new Thread(() -> {
                try (BufferedReader r = new BufferedReader(new InputStreamReader(child.getInputStream(), StandardCharsets.UTF_8))) {
                    for (String l; (l = r.readLine()) != null; ) lines.add(l);
                } catch (java.io.IOException e) {
                    // killed: its output ends
                }
                lines.add("eof");
            }, "share-member-out");
            reader.setDaemon(true);
            reader.start();
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (true) {
                String l = lines.poll(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                check(l != null, "the child consumer acquired nothing in " + WAIT.toSeconds() + " s");
                System.err.println("share_member_kill: child: " + l);
                String[] f = l.split(" ");
                if (f[0].equals("record")) held.put(f[4], Short.parseShort(f[3]));
                else if (f[0].equals("held")) break;
                else throw new AssertionError("the child consumer: " + l);
            }
        } finally {
            // kill -9 (destroyForcibly is SIGKILL on Linux), also when the scenario failed.
            child.destroyForcibly();
            child.waitFor(10, TimeUnit.SECONDS);
            killedAt = System.nanoTime();
        }
        check(!held.isEmpty(), "the child consumer held nothing");
        for (Map.Entry<String, Short> e : held.entrySet()) {
            check(e.getValue() == 1, "the child got " + e.getKey() + " with delivery count " + e.getValue());
        }
        ShareKit.Ledger ledger = new ShareKit.Ledger();
        long firstHeldBack = -1;
        long firstAny = -1;
        try (KafkaShareConsumer<String, String> c = share.consumer(group, "explicit", topic)) {
            long deadline = killedAt + Duration.ofMillis(ShareKit.MIN_LOCK_MS).toNanos() + WAIT.toNanos();
            while (!allAccepted(ledger, values)) {
                check(System.nanoTime() < deadline, "after the kill the other consumer got " + ledger.distinct() + " of "
                        + values.size() + " (held by the killed one: " + held.keySet() + "; deliveries " + ledger.deliveries + ")");
                for (ConsumerRecord<String, String> r : ShareKit.pollAck(c, ledger, x -> AcknowledgeType.ACCEPT, Duration.ofSeconds(15))) {
                    if (firstAny < 0) firstAny = System.nanoTime();
                    if (firstHeldBack < 0 && held.containsKey(r.value())) firstHeldBack = System.nanoTime();
                }
            }
            long quiet = System.nanoTime() + ShareKit.QUIET.toNanos();
            while (System.nanoTime() < quiet) ShareKit.pollAck(c, ledger, x -> AcknowledgeType.ACCEPT, Duration.ofSeconds(15));
        }
        check(ledger.failed.isEmpty(), "accepts failed: " + ledger.failed);
        check(ledger.afterFinal.isEmpty(), "delivered again after an accept: " + ledger.afterFinal);
        List<String> wrong = new ArrayList<>();
        Map<Short, Integer> heldCounts = new TreeMap<>();
        int prefetched = 0;
        for (String v : values) {
            List<Short> d = ledger.of(v);
            // A record the child's client fetched ahead (acquired, never handed to the child
            // before the kill) comes back with count 2 too: the client fetches the next records
            // once poll() has returned, and the kill can land after that fetch. Never above 2.
            boolean ok = d.size() == 1 && ledger.confirmedCount(v, AcknowledgeType.ACCEPT) == 1
                    && (held.containsKey(v) ? d.get(0) >= 2 : d.get(0) == 1 || d.get(0) == 2);
            if (!ok) wrong.add(v + (held.containsKey(v) ? " (held)" : "") + " " + d);
            if (held.containsKey(v) && !d.isEmpty()) heldCounts.merge(d.get(0), 1, Integer::sum);
            if (!held.containsKey(v) && d.size() == 1 && d.get(0) == 2) prefetched++;
        }
        check(wrong.isEmpty(), "not delivered once more and accepted as expected (held ones: delivery count >= 2, "
                + "the rest 1, or 2 if the child's client had fetched them ahead): " + wrong);
        String offsets = share.checkAllAcknowledged(group, topic, 1, Duration.ofSeconds(15));
        long backMs = (firstHeldBack - killedAt) / 1_000_000;
        long anyMs = (firstAny - killedAt) / 1_000_000;
        System.err.println("share_member_kill: held " + held.keySet() + ", back after " + backMs + " ms (the other consumer's "
                + "first record after " + anyMs + " ms) with delivery counts " + heldCounts);
        return "the killed child held " + held.size() + " of " + values.size() + "; the other consumer (started after the "
                + "kill) got them back " + backMs + " ms after the kill -9 (its first record of any after " + anyMs
                + " ms; lock " + ShareKit.MIN_LOCK_MS + " ms) with delivery counts (count=records) " + heldCounts + ", the other "
                + (values.size() - held.size() - prefetched) + " with 1 and " + prefetched + " fetched ahead by the child with 2; "
                + "each accepted exactly once; offsets " + offsets;
    }

    private static boolean allAccepted(ShareKit.Ledger ledger, List<String> values) {
        for (String v : values) if (ledger.confirmedCount(v, AcknowledgeType.ACCEPT) == 0) return false;
        return true;
    }

    /**
     * 1500 records on three partitions, produced first; one explicit-mode consumer accepts them
     * (at most 10 per poll, share.acquire.mode=record_limit, commitSync after each poll), slowly
     * until the kill command returns so that consumption spans it, then at full speed.
     * COMPAT_KILL_LEADER kills -9 the broker mid-run and restarts it (on Kafka the leader of
     * partition 0). The kill lands while the consumer holds a batch with records of partition 0
     * acquired and unacknowledged: it accepts that batch only once the kill -9 has taken effect
     * (the kill command's "killed" line). Every record must be delivered; no accept may be
     * confirmed twice and no record delivered after its accept was confirmed; a record whose
     * accept commitSync reported failed must come back and be accepted, unless the broker had
     * applied it (then the group's offsets show it acknowledged, and its delivery count stayed
     * below the default delivery limit, so it was not archived); the group's offsets must show
     * every record acknowledged (lag 0), and records of partition 0 must be accepted after the
     * kill. The detail and stderr give the redeliveries, their delivery counts, the failed
     * accepts and their errors.
     */
    String leaderKill() throws Exception {
        String topic = compat.prefix + "-share-leader-kill";
        String group = topic + "-g";
        int partitions = 3;
        share.groupConfigs(group, "share.auto.offset.reset", "earliest");
        List<String> values = Kit.numbered("lk", 1500);
        kit.createTopic(topic, partitions, values);
        ShareKit.Ledger ledger = new ShareKit.Ledger();
        AtomicBoolean fast = new AtomicBoolean();
        AtomicBoolean stop = new AtomicBoolean();
        AtomicBoolean holdNext = new AtomicBoolean();
        CountDownLatch holding = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        List<String> heldAcrossKill = new ArrayList<>();
        AtomicReference<Throwable> crash = new AtomicReference<>();
        AtomicLong lastDelivery = new AtomicLong(System.nanoTime());
        AtomicInteger p0AfterKill = new AtomicInteger();
        AtomicBoolean killed = new AtomicBoolean();
        Thread consumer = new Thread(() -> {
            try (KafkaShareConsumer<String, String> c = share.consumer(group, "explicit", topic,
                    "max.poll.records", "10", "share.acquire.mode", "record_limit")) {
                while (!stop.get()) {
                    List<ConsumerRecord<String, String>> got = ShareKit.poll(c, ledger);
                    if (!got.isEmpty()) lastDelivery.set(System.nanoTime());
                    boolean afterKill = killed.get();
                    if (got.stream().anyMatch(r -> r.partition() == 0) && holdNext.compareAndSet(true, false)) {
                        // Held, acquired and unacknowledged, across the kill -9.
                        got.forEach(r -> heldAcrossKill.add(r.value() + "@p" + r.partition()));
                        holding.countDown();
                        release.await();
                    }
                    ShareKit.ackAll(c, ledger, got, x -> AcknowledgeType.ACCEPT, Duration.ofSeconds(20));
                    if (afterKill) {
                        for (ConsumerRecord<String, String> r : got) {
                            if (r.partition() == 0 && ledger.confirmedCount(r.value(), AcknowledgeType.ACCEPT) > 0) {
                                p0AfterKill.incrementAndGet();
                            }
                        }
                    }
                    if (!fast.get() && !got.isEmpty()) Thread.sleep(150);
                }
            } catch (Throwable t) {
                crash.compareAndSet(null, t);
            }
        }, "share-leader-kill-consumer");
        consumer.start();
        long killMs;
        long heldMs = -1;
        int acceptedBefore;
        try {
            long deadline = System.nanoTime() + WAIT.toNanos();
            while (acceptedBefore(ledger) < 100) {
                check(crash.get() == null, "the consumer failed before the kill: " + Compat.describe(crash.get()));
                check(System.nanoTime() < deadline, "only " + acceptedBefore(ledger) + " records accepted in "
                        + WAIT.toSeconds() + " s before the kill");
                Thread.sleep(50);
            }
            holdNext.set(true);
            check(holding.await(30, TimeUnit.SECONDS) || crash.get() != null,
                    "no batch with a record of partition 0 within 30 s");
            check(crash.get() == null, "the consumer failed before the kill: " + Compat.describe(crash.get()));
            acceptedBefore = acceptedBefore(ledger);
            long killStart = System.nanoTime();
            // "killed": kill-kafka.sh's "node N killed after", cluster.sh's "killed with SIGKILL".
            Compat.FaultRun run = compat.fault("COMPAT_KILL_LEADER", compat.killLeader, "killed", () -> {
                killed.set(true);
                release.countDown();
            });
            heldMs = (run.at - killStart) / 1_000_000;
            killMs = (System.nanoTime() - killStart) / 1_000_000;
            fast.set(true);
            // Until every record is accepted, or nothing has arrived for 20 s (some accept was
            // applied although reported failed: checked below).
            deadline = System.nanoTime() + Duration.ofSeconds(90).toNanos();
            while (!allAccepted(ledger, values) && System.nanoTime() - lastDelivery.get() < 20_000_000_000L) {
                check(crash.get() == null, "the consumer failed: " + Compat.describe(crash.get()));
                check(System.nanoTime() < deadline, "after the kill: " + ledger.distinct() + " of " + values.size()
                        + " delivered within 90 s");
                Thread.sleep(100);
            }
            // The further poll round: nothing more may arrive.
            Thread.sleep(ShareKit.QUIET.toMillis());
        } finally {
            release.countDown();
            stop.set(true);
            consumer.join(60_000);
        }
        check(crash.get() == null, "the consumer failed: " + Compat.describe(crash.get()));
        List<String> lost = new ArrayList<>();
        List<String> twice = new ArrayList<>();
        List<String> unconfirmed = new ArrayList<>();
        List<String> silent = new ArrayList<>();
        Map<String, Integer> redeliveredCounts = new TreeMap<>();
        short maxCount = 0;
        Map<String, Integer> errors = new TreeMap<>();
        synchronized (ledger) {
            for (String v : values) {
                List<Short> d = ledger.of(v);
                if (d.isEmpty()) lost.add(v);
                if (d.size() > 1) redeliveredCounts.merge(d.toString(), 1, Integer::sum);
                for (short s : d) maxCount = (short) Math.max(maxCount, s);
                int accepts = ledger.confirmedCount(v, AcknowledgeType.ACCEPT);
                if (accepts > 1) twice.add(v);
                if (accepts == 0 && !d.isEmpty() && ledger.failed.containsKey(v)) unconfirmed.add(v + " " + d);
                if (accepts == 0 && !d.isEmpty() && !ledger.failed.containsKey(v)) silent.add(v + " " + d);
            }
            for (List<String> es : ledger.failed.values()) {
                for (String e : es) errors.merge(e.replaceAll("^ACCEPT: ", "").replaceAll("(Exception): .*", "$1"), 1, Integer::sum);
            }
        }
        int redelivered = redeliveredCounts.values().stream().mapToInt(Integer::intValue).sum();
        System.err.println("share_leader_kill: held across the kill -9 " + heldAcrossKill + "; " + redelivered
                + " records redelivered, by delivery counts " + redeliveredCounts + "; " + ledger.failed.size()
                + " records with a failed accept: " + errors);
        for (Map.Entry<String, List<String>> e : ledger.failed.entrySet()) {
            System.err.println("share_leader_kill: failed accept " + e.getKey() + " " + ledger.where.get(e.getKey())
                    + " deliveries " + ledger.of(e.getKey()) + ": " + e.getValue());
        }
        check(lost.isEmpty(), "never delivered: " + sample(lost));
        check(twice.isEmpty(), "accepted (confirmed) more than once: " + sample(twice));
        check(ledger.afterFinal.isEmpty(), "delivered again after its accept was confirmed: " + sample(ledger.afterFinal));
        check(silent.isEmpty(), "delivered, never accepted and no failure reported: " + sample(silent));
        // Kafka's default share.delivery.count.limit: a record delivered that often may have been archived.
        check(maxCount < 5, "a record was delivered " + maxCount + " times (the default delivery limit is 5: archived?)");
        String offsets = share.checkAllAcknowledged(group, topic, partitions, Duration.ofSeconds(30));
        check(p0AfterKill.get() > 0, "no record of partition 0 was accepted after the kill");
        return values.size() + " records each accepted once, none lost: " + acceptedBefore + " before the kill, "
                + heldAcrossKill.size() + " held unacknowledged across it (accepted " + heldMs + " ms after the kill began), "
                + p0AfterKill.get() + " of partition 0 after it; kill+restart " + killMs + " ms; " + redelivered
                + " redelivered (delivery counts " + redeliveredCounts + "), " + ledger.failed.size() + " accepts reported failed "
                + errors + (unconfirmed.isEmpty() ? "" : ", " + unconfirmed.size() + " of them applied anyway (not redelivered)")
                + "; offsets " + offsets;
    }

    private static int acceptedBefore(ShareKit.Ledger ledger) {
        synchronized (ledger) {
            int n = 0;
            for (Map<AcknowledgeType, Integer> c : ledger.confirmed.values()) if (c.getOrDefault(AcknowledgeType.ACCEPT, 0) > 0) n++;
            return n;
        }
    }
}

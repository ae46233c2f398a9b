// The share-group (KIP-932, "queues") scenarios without faults: implicit acknowledgement, the
// three explicit acknowledgement types with their commit results and callback, the delivery
// count limit archiving a record released over and over, an acquisition lock running out under
// a live member that stopped polling, and two members sharing a topic. Every check is exact:
// the records delivered, their delivery counts, each acknowledgement's outcome, and the group's
// share-group offsets at the end (ListShareGroupOffsets: every record acknowledged, lag 0).
package dev.onelog.compat.share;

import static dev.onelog.compat.Compat.check;
import static dev.onelog.compat.share.ShareKit.deliveryCount;
import static dev.onelog.compat.share.ShareKit.sample;

import dev.onelog.compat.Compat;
import dev.onelog.compat.Kit;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.InvalidRecordStateException;
import org.apache.kafka.common.errors.InvalidRequestException;

final class Queues {
    /** How long a scenario waits for records it expects. */
    private static final Duration WAIT = Duration.ofSeconds(40);
    private final Compat compat;
    private final Kit kit;
    private final ShareKit share;

    Queues(Compat compat, ShareKit share) {
        this.compat = compat;
        this.kit = share.kit();
        this.share = share;
    }

    private static long deadline(Duration d) {
        return System.nanoTime() + d.toNanos();
    }

    /**
     * N records on three partitions; one implicit-mode consumer (share.acknowledgement.mode
     * implicit, the default) reads each exactly once, delivery count 1; a further poll round (which
     * implicitly accepts the last batch) gets nothing; commitSync reports no failed partition; the
     * group's offsets show every record acknowledged. share.auto.offset.reset=earliest is set on the
     * group first: the default, latest, would start the share partitions after the records
     * produced before the first member joined.
     */
    String consumeImplicit() throws Exception {
        String topic = compat.prefix + "-share-implicit";
        String group = topic + "-g";
        int partitions = 3;
        List<String> values = Kit.numbered("si", 30);
        share.groupConfigs(group, "share.auto.offset.reset", "earliest");
        kit.createTopic(topic, partitions, values);
        Map<String, Integer> seen = new TreeMap<>();
        List<String> notFirst = new ArrayList<>();
        List<String> more = new ArrayList<>();
        Map<TopicIdPartition, Optional<KafkaException>> commit;
        int polls = 0;
        try (KafkaShareConsumer<String, String> c = share.consumer(group, "implicit", topic)) {
            long deadline = deadline(WAIT);
            while (seen.size() < values.size()) {
                check(System.nanoTime() < deadline, "read " + seen.size() + " of " + values.size() + " records in "
                        + WAIT.toSeconds() + " s");
                for (ConsumerRecord<String, String> r : c.poll(Kit.POLL)) {
                    seen.merge(r.value(), 1, Integer::sum);
                    if (deliveryCount(r) != 1) notFirst.add(r.value() + " dc " + deliveryCount(r));
                }
                polls++;
            }
            // The second round: its first poll accepts the last batch implicitly.
            long quiet = deadline(ShareKit.QUIET);
            while (System.nanoTime() < quiet) for (ConsumerRecord<String, String> r : c.poll(Kit.POLL)) more.add(r.value());
            commit = c.commitSync();
        }
        List<String> dups = new ArrayList<>();
        seen.forEach((v, n) -> {
            if (n > 1) dups.add(v + " x" + n);
        });
        check(dups.isEmpty(), "delivered more than once: " + dups);
        check(seen.keySet().equals(new TreeSet<>(values)), "delivered " + seen.keySet() + ", produced " + values);
        check(notFirst.isEmpty(), "first deliveries with a delivery count other than 1: " + notFirst);
        check(more.isEmpty(), "the second poll round got " + more.size() + " more records: " + sample(more));
        for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : commit.entrySet()) {
            check(e.getValue().isEmpty(), "commitSync failed for " + e.getKey() + ": " + e.getValue());
        }
        String offsets = share.checkAllAcknowledged(group, topic, partitions, Duration.ofSeconds(15));
        return values.size() + " records on " + partitions + " partitions delivered once each (delivery count 1) in "
                + polls + " polls, none in a further " + ShareKit.QUIET.toSeconds() + " s; offsets "
                + offsets;
    }

    /** The plan of share_explicit_ack: record i is accepted, released or rejected by i mod 3. */
    private static AcknowledgeType plan(int i) {
        return i % 3 == 0 ? AcknowledgeType.ACCEPT : i % 3 == 1 ? AcknowledgeType.RELEASE : AcknowledgeType.REJECT;
    }

    private static int index(String value) {
        return Integer.parseInt(value.replaceAll("^[a-z]+", ""));
    }

    /**
     * share.acknowledgement.mode=explicit on one partition of 12 records: on first delivery
     * record i is accepted (i mod 3 = 0), released (1) or rejected (2), commitSync after every
     * poll. The released come back exactly once more, with delivery count 2, and are accepted
     * then; the accepted and the rejected never come back. Every commitSync names the partition
     * with no error; the acknowledgement commit callback reports every acknowledged offset (the
     * released ones twice) with no exception; the group's offsets show all 12 acknowledged.
     */
    String explicitAck() throws Exception {
        String topic = compat.prefix + "-share-explicit";
        String group = topic + "-g";
        List<String> values = Kit.numbered("ea", 12);
        share.groupConfigs(group, "share.auto.offset.reset", "earliest");
        kit.createTopic(topic, 1, values);
        ShareKit.Ledger ledger = new ShareKit.Ledger();
        List<Exception> callbackErrors = new ArrayList<>();
        Map<Long, Integer> callbackOffsets = new TreeMap<>();
        int[] callbacks = {0};
        try (KafkaShareConsumer<String, String> c = share.consumer(group, "explicit", topic)) {
            c.setAcknowledgementCommitCallback((offsets, error) -> {
                callbacks[0]++;
                if (error != null) callbackErrors.add(error);
                offsets.values().forEach(set -> set.forEach(o -> callbackOffsets.merge(o, 1, Integer::sum)));
            });
            long deadline = deadline(WAIT);
            while (!explicitDone(ledger, values)) {
                check(System.nanoTime() < deadline, "within " + WAIT.toSeconds() + " s: " + ledger.distinct()
                        + " records delivered, " + ledger.total() + " deliveries: " + ledger.deliveries);
                ShareKit.pollAck(c, ledger, r -> ledger.of(r.value()).size() == 1 ? plan(index(r.value()))
                        : AcknowledgeType.ACCEPT, Duration.ofSeconds(15));
            }
            long quiet = deadline(ShareKit.QUIET);
            while (System.nanoTime() < quiet) ShareKit.pollAck(c, ledger, r -> AcknowledgeType.ACCEPT, Duration.ofSeconds(15));
        }
        check(ledger.failed.isEmpty(), "acknowledgements failed: " + ledger.failed);
        check(ledger.afterFinal.isEmpty(), "delivered again after an accept or reject: " + ledger.afterFinal);
        Map<Long, Integer> wantOffsets = new TreeMap<>();
        for (int i = 0; i < values.size(); i++) {
            String v = values.get(i);
            AcknowledgeType t = plan(i);
            List<Short> want = t == AcknowledgeType.RELEASE ? List.of((short) 1, (short) 2) : List.of((short) 1);
            check(ledger.of(v).equals(want), v + " (" + t + ") delivered with delivery counts " + ledger.of(v)
                    + ", expected " + want);
            check(ledger.confirmedCount(v, t) == 1, v + ": its " + t + " not confirmed once");
            if (t == AcknowledgeType.RELEASE) {
                check(ledger.confirmedCount(v, AcknowledgeType.ACCEPT) == 1, v + ": its accept after the release not confirmed");
            }
            wantOffsets.put((long) i, t == AcknowledgeType.RELEASE ? 2 : 1);
        }
        check(callbackErrors.isEmpty(), "the acknowledgement commit callback reported " + callbackErrors);
        check(callbackOffsets.equals(wantOffsets), "the acknowledgement commit callback reported offsets (offset=times) "
                + callbackOffsets + ", expected " + wantOffsets);
        String offsets = share.checkAllAcknowledged(group, topic, 1, Duration.ofSeconds(15));
        return "4 accepted, 4 released (back once with delivery count 2, then accepted), 4 rejected (never back); "
                + "every commitSync without error, " + callbacks[0] + " callbacks with every offset, none in a further "
                + ShareKit.QUIET.toSeconds() + " s; offsets " + offsets;
    }

    private static boolean explicitDone(ShareKit.Ledger ledger, List<String> values) {
        for (int i = 0; i < values.size(); i++) {
            String v = values.get(i);
            int want = plan(i) == AcknowledgeType.RELEASE ? 2 : 1;
            if (ledger.of(v).size() < want) return false;
            if (plan(i) == AcknowledgeType.RELEASE && ledger.confirmedCount(v, AcknowledgeType.ACCEPT) == 0) return false;
        }
        return true;
    }

    /**
     * The two ways a record is archived. With group config share.delivery.count.limit=3 (a limit
     * of 1 must be refused: Kafka's minimum is 2), a record released on every delivery arrives
     * exactly 3 times (delivery counts 1, 2, 3) and never again; a rejected record arrives once;
     * an accepted one once. A record produced after that is still delivered (delivery count 1):
     * the archived ones hold nothing up, and the group's offsets show every record done.
     */
    String rejectArchive() throws Exception {
        String topic = compat.prefix + "-share-archive";
        String group = topic + "-g";
        int limit = 3;
        Throwable refused = share.rejectedGroupConfig(group, "share.delivery.count.limit", "1");
        check(Kit.causedBy(refused, InvalidConfigurationException.class, InvalidRequestException.class),
                "share.delivery.count.limit=1 refused with " + Compat.describe(refused));
        share.groupConfigs(group, "share.auto.offset.reset", "earliest", "share.delivery.count.limit", String.valueOf(limit));
        kit.createTopic(topic, 1, List.of("ra-release", "ra-reject", "ra-accept"));
        ShareKit.Ledger ledger = new ShareKit.Ledger();
        java.util.function.Function<ConsumerRecord<String, String>, AcknowledgeType> decide = r ->
                r.value().endsWith("release") ? AcknowledgeType.RELEASE
                        : r.value().endsWith("reject") ? AcknowledgeType.REJECT : AcknowledgeType.ACCEPT;
        try (KafkaShareConsumer<String, String> c = share.consumer(group, "explicit", topic)) {
            long deadline = deadline(WAIT);
            while (ledger.of("ra-release").size() < limit || ledger.of("ra-reject").isEmpty() || ledger.of("ra-accept").isEmpty()) {
                check(System.nanoTime() < deadline, "within " + WAIT.toSeconds() + " s: deliveries " + ledger.deliveries);
                ShareKit.pollAck(c, ledger, decide, Duration.ofSeconds(15));
            }
            long quiet = deadline(ShareKit.QUIET);
            while (System.nanoTime() < quiet) ShareKit.pollAck(c, ledger, decide, Duration.ofSeconds(15));
            try (KafkaProducer<String, String> p = kit.producer()) {
                Kit.sendAll(p, topic, List.of("ra-after"));
            }
            deadline = deadline(WAIT);
            while (ledger.of("ra-after").isEmpty()) {
                check(System.nanoTime() < deadline, "the record produced after the archived ones did not arrive in "
                        + WAIT.toSeconds() + " s; deliveries " + ledger.deliveries);
                ShareKit.pollAck(c, ledger, decide, Duration.ofSeconds(15));
            }
        }
        check(ledger.failed.isEmpty(), "acknowledgements failed: " + ledger.failed);
        List<Short> counts = new ArrayList<>();
        for (short i = 1; i <= limit; i++) counts.add(i);
        check(ledger.of("ra-release").equals(counts), "the released record arrived with delivery counts "
                + ledger.of("ra-release") + ", expected " + counts + " (share.delivery.count.limit=" + limit + ")");
        check(ledger.confirmedCount("ra-release", AcknowledgeType.RELEASE) == limit, "its " + limit + " releases not all confirmed");
        check(ledger.of("ra-reject").equals(List.of((short) 1)), "the rejected record: delivery counts " + ledger.of("ra-reject"));
        check(ledger.confirmedCount("ra-reject", AcknowledgeType.REJECT) == 1, "the reject not confirmed");
        check(ledger.of("ra-accept").equals(List.of((short) 1)), "the accepted record: delivery counts " + ledger.of("ra-accept"));
        check(ledger.of("ra-after").equals(List.of((short) 1)), "the later record: delivery counts " + ledger.of("ra-after"));
        String offsets = share.checkAllAcknowledged(group, topic, 1, Duration.ofSeconds(15));
        return "delivery limit 1 refused (" + refused.getClass().getSimpleName() + "); limit " + limit
                + ": the released record arrived " + limit + " times (" + counts + ") then never, the rejected once, "
                + "the accepted once, a later record once; offsets " + offsets;
    }

    /**
     * share.record.lock.duration.ms at Kafka 4.4's minimum, 15000 (14999 must be refused). A
     * consumer (explicit mode) acquires the 5 records in one poll, its acquisitionLockTimeoutMs()
     * says 15000, and then it stops polling but stays alive (its heartbeats go on): nothing renews
     * the locks. A second consumer must get none of them until 15 s after the first one's poll
     * began, then every one of them with delivery count 2 (any the first did not get, with 1).
     * While the second holds its first batch unacknowledged, the first's late ACCEPT of what it
     * held must fail for the partition with InvalidRecordStateException (the records are no
     * longer its own); the second then accepts everything, every accept confirmed.
     */
    String lockExpiry() throws Exception {
        String topic = compat.prefix + "-share-lock";
        String group = topic + "-g";
        Throwable refused = share.rejectedGroupConfig(group, "share.record.lock.duration.ms", String.valueOf(ShareKit.MIN_LOCK_MS - 1));
        check(Kit.causedBy(refused, InvalidConfigurationException.class, InvalidRequestException.class),
                "share.record.lock.duration.ms=" + (ShareKit.MIN_LOCK_MS - 1) + " refused with " + Compat.describe(refused));
        share.groupConfigs(group, "share.auto.offset.reset", "earliest",
                "share.record.lock.duration.ms", String.valueOf(ShareKit.MIN_LOCK_MS));
        List<String> values = Kit.numbered("le", 5);
        kit.createTopic(topic, 1, values);
        List<ConsumerRecord<String, String>> held = new ArrayList<>();
        Set<String> heldValues = new TreeSet<>();
        ShareKit.Ledger second = new ShareKit.Ledger();
        Map<String, Long> arrived = new HashMap<>();
        Optional<Integer> lockMs;
        Map<TopicIdPartition, Optional<KafkaException>> late;
        long acquired = 0;
        try (KafkaShareConsumer<String, String> a = share.consumer(group, "explicit", topic)) {
            long deadline = deadline(WAIT);
            while (held.isEmpty()) {
                check(System.nanoTime() < deadline, "the first consumer acquired nothing in " + WAIT.toSeconds() + " s");
                acquired = System.nanoTime();
                for (ConsumerRecord<String, String> r : a.poll(Kit.POLL)) {
                    held.add(r);
                    heldValues.add(r.value());
                    check(deliveryCount(r) == 1, r.value() + " arrived first with delivery count " + deliveryCount(r));
                }
            }
            lockMs = a.acquisitionLockTimeoutMs();
            try (KafkaShareConsumer<String, String> b = share.consumer(group, "explicit", topic)) {
                deadline = acquired + Duration.ofMillis(ShareKit.MIN_LOCK_MS).toNanos() + WAIT.toNanos();
                List<ConsumerRecord<String, String>> first = new ArrayList<>();
                while (first.isEmpty()) {
                    check(System.nanoTime() < deadline, "the second consumer got nothing within " + WAIT.toSeconds()
                            + " s of the locks' expiry");
                    for (ConsumerRecord<String, String> r : b.poll(Kit.POLL)) {
                        first.add(r);
                        second.delivered(r);
                        arrived.putIfAbsent(r.value(), System.nanoTime());
                    }
                }
                // The first consumer accepts what it held long ago, while the second holds some of it.
                for (ConsumerRecord<String, String> r : held) a.acknowledge(r, AcknowledgeType.ACCEPT);
                late = a.commitSync(Duration.ofSeconds(15));
                for (ConsumerRecord<String, String> r : first) b.acknowledge(r, AcknowledgeType.ACCEPT);
                Map<TopicIdPartition, Optional<KafkaException>> accepted = b.commitSync(Duration.ofSeconds(15));
                for (ConsumerRecord<String, String> r : first) {
                    second.outcome(r.value(), AcknowledgeType.ACCEPT, accepted.values().iterator().next());
                }
                while (arrived.size() < values.size()) {
                    check(System.nanoTime() < deadline, "the second consumer got " + arrived.keySet() + " within "
                            + WAIT.toSeconds() + " s of the locks' expiry");
                    for (ConsumerRecord<String, String> r : ShareKit.pollAck(b, second, x -> AcknowledgeType.ACCEPT,
                            Duration.ofSeconds(15))) {
                        arrived.putIfAbsent(r.value(), System.nanoTime());
                    }
                }
                long quiet = deadline(ShareKit.QUIET);
                while (System.nanoTime() < quiet) ShareKit.pollAck(b, second, x -> AcknowledgeType.ACCEPT, Duration.ofSeconds(15));
            }
        }
        check(lockMs.equals(Optional.of(ShareKit.MIN_LOCK_MS)), "the first consumer's acquisitionLockTimeoutMs() is " + lockMs);
        check(second.failed.isEmpty(), "the second consumer's accepts failed: " + second.failed);
        check(second.afterFinal.isEmpty(), "delivered again after an accept: " + second.afterFinal);
        long earliestMs = Long.MAX_VALUE;
        for (String v : values) {
            List<Short> want = List.of(heldValues.contains(v) ? (short) 2 : (short) 1);
            check(second.of(v).equals(want), v + " reached the second consumer with delivery counts " + second.of(v)
                    + ", expected " + want + (heldValues.contains(v) ? " (held by the first)" : ""));
            check(second.confirmedCount(v, AcknowledgeType.ACCEPT) == 1, v + ": the second consumer's accept not confirmed");
            if (!heldValues.contains(v)) continue;
            long afterMs = (arrived.get(v) - acquired) / 1_000_000;
            earliestMs = Math.min(earliestMs, afterMs);
            // The lock starts at the acquisition, after the poll began: it cannot run out before.
            check(afterMs >= ShareKit.MIN_LOCK_MS - 250, v + " reached the second consumer " + afterMs
                    + " ms after the first consumer's poll began, before its " + ShareKit.MIN_LOCK_MS + " ms lock ran out");
        }
        check(late.size() == 1, "the first consumer's late commitSync gave results " + late);
        Optional<KafkaException> lateError = late.values().iterator().next();
        System.err.println("share_lock_expiry: held " + heldValues + ", back at the second consumer after " + earliestMs
                + " ms; the holder's late accept: " + lateError);
        check(lateError.isPresent() && Kit.causedBy(lateError.get(), InvalidRecordStateException.class),
                "the first consumer's late accept of records the second holds must fail with InvalidRecordStateException; "
                        + "got " + late);
        String offsets = share.checkAllAcknowledged(group, topic, 1, Duration.ofSeconds(15));
        return "lock 14999 ms refused; lock " + lockMs.get() + " ms (acquisitionLockTimeoutMs): the " + heldValues.size()
                + " held reached the second consumer with delivery count 2, the first " + earliestMs + " ms after the "
                + "holder's poll began; the holder's late accept failed with " + lateError.get().getClass().getSimpleName()
                + "; offsets " + offsets;
    }

    /**
     * Two explicit-mode consumers of one group on a four-partition topic: once the group
     * describes both as members and their assignments cover every partition, 200 records are
     * produced; between them they read each exactly once (delivery count 1), every accept
     * confirmed, and nothing more in a further poll round; each must have read some.
     */
    String twoConsumers() throws Exception {
        String topic = compat.prefix + "-share-two";
        String group = topic + "-g";
        int partitions = 4;
        share.groupConfigs(group, "share.auto.offset.reset", "earliest");
        kit.createTopic(topic, partitions);
        List<String> values = Kit.numbered("tc", 200);
        ShareKit.Ledger all = new ShareKit.Ledger();
        Map<String, Integer> counts = new TreeMap<>();
        String assignment;
        try (KafkaShareConsumer<String, String> c1 = share.consumer(group, "explicit", topic);
                KafkaShareConsumer<String, String> c2 = share.consumer(group, "explicit", topic)) {
            List<KafkaShareConsumer<String, String>> both = List.of(c1, c2);
            long deadline = deadline(WAIT);
            while (true) {
                for (KafkaShareConsumer<String, String> c : both) {
                    check(ShareKit.pollAck(c, all, r -> AcknowledgeType.ACCEPT, Duration.ofSeconds(15)).isEmpty(),
                            "a record arrived before any was produced");
                }
                ShareGroupDescription d = share.describe(group);
                Set<TopicPartition> union = new HashSet<>();
                boolean everyone = d.members().size() == 2;
                for (ShareMemberDescription m : d.members()) {
                    union.addAll(m.assignment().topicPartitions());
                    everyone &= !m.assignment().topicPartitions().isEmpty();
                }
                assignment = describeAssignment(d);
                if (everyone && union.size() == partitions) break;
                check(System.nanoTime() < deadline, "the group did not settle in " + WAIT.toSeconds() + " s: " + assignment);
            }
            try (KafkaProducer<String, String> p = kit.producer()) {
                Kit.sendAll(p, topic, values);
            }
            deadline = deadline(WAIT);
            while (all.distinct() < values.size()) {
                check(System.nanoTime() < deadline, "read " + all.distinct() + " of " + values.size() + " in "
                        + WAIT.toSeconds() + " s");
                for (int i = 0; i < both.size(); i++) {
                    for (ConsumerRecord<String, String> r : ShareKit.pollAck(both.get(i), all, x -> AcknowledgeType.ACCEPT,
                            Duration.ofSeconds(15))) {
                        counts.merge("c" + (i + 1), 1, Integer::sum);
                    }
                }
            }
            long quiet = deadline(ShareKit.QUIET);
            while (System.nanoTime() < quiet) {
                for (KafkaShareConsumer<String, String> c : both) {
                    ShareKit.pollAck(c, all, x -> AcknowledgeType.ACCEPT, Duration.ofSeconds(15));
                }
            }
        }
        check(all.failed.isEmpty(), "accepts failed: " + all.failed);
        List<String> wrong = new ArrayList<>();
        for (String v : values) {
            if (!all.of(v).equals(List.of((short) 1)) || all.confirmedCount(v, AcknowledgeType.ACCEPT) != 1) {
                wrong.add(v + " " + all.of(v));
            }
        }
        check(wrong.isEmpty(), "not delivered exactly once with delivery count 1 and accepted: " + sample(wrong));
        check(all.distinct() == values.size(), "delivered " + all.distinct() + " distinct records, produced " + values.size());
        check(counts.size() == 2, "one consumer read every record (" + counts + "); assignment " + assignment);
        String offsets = share.checkAllAcknowledged(group, topic, partitions, Duration.ofSeconds(15));
        return values.size() + " records read exactly once between the two " + counts + ", assignment " + assignment
                + "; offsets " + offsets;
    }

    private static String describeAssignment(ShareGroupDescription d) {
        List<String> out = new ArrayList<>();
        for (ShareMemberDescription m : d.members()) {
            List<Integer> parts = new ArrayList<>();
            for (TopicPartition tp : m.assignment().topicPartitions()) parts.add(tp.partition());
            Collections.sort(parts);
            out.add(parts.toString());
        }
        Collections.sort(out);
        return d.groupState() + " " + String.join(" ", out);
    }
}

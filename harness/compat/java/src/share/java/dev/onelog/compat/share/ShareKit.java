// Share-group (KIP-932) set-up shared by the share scenarios: KafkaShareConsumer settings, group
// configs set with Admin.incrementalAlterConfigs on a GROUP resource and read back, the group's
// share-group offsets (ListShareGroupOffsets), and a ledger of every delivery and acknowledgement outcome.
// kafka-clients 4.4.0 only (src/share/java is compiled by the pom's `share` profile alone).
package dev.onelog.compat.share;

import static dev.onelog.compat.Compat.check;

import dev.onelog.compat.Compat;
import dev.onelog.compat.Kit;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import java.util.function.Function;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.SharePartitionOffsetInfo;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;

final class ShareKit {
    /** How long a consumer must then get nothing more: "a second poll round". */
    static final Duration QUIET = Duration.ofSeconds(3);
    /** The group's record lock duration in the scenarios that wait for one: Kafka 4.4's minimum. */
    static final int MIN_LOCK_MS = 15000;

    private final Compat compat;
    private final Kit kit;

    ShareKit(Compat compat, Kit kit) {
        this.compat = compat;
        this.kit = kit;
    }

    Kit kit() {
        return kit;
    }

    /**
     * A String/String share consumer of `group` with share.acknowledgement.mode `mode` (implicit
     * or explicit), `extra` as alternating keys and values, subscribed to `topic`.
     */
    KafkaShareConsumer<String, String> consumer(String group, String mode, String topic, String... extra) {
        Properties p = kit.common();
        p.put("group.id", group);
        p.put("client.id", group + "-" + mode + "-" + System.nanoTime() % 100000);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("share.acknowledgement.mode", mode);
        for (int i = 0; i + 1 < extra.length; i += 2) p.put(extra[i], extra[i + 1]);
        KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p);
        c.subscribe(List.of(topic));
        return c;
    }

    /**
     * Sets the share group's configs (alternating keys and values) with incrementalAlterConfigs
     * on ConfigResource.Type.GROUP, before any member joins, and checks that describeConfigs
     * reads each one back.
     */
    void groupConfigs(String group, String... keysAndValues) throws Exception {
        ConfigResource r = new ConfigResource(ConfigResource.Type.GROUP, group);
        List<AlterConfigOp> ops = new ArrayList<>();
        Map<String, String> want = new LinkedHashMap<>();
        for (int i = 0; i + 1 < keysAndValues.length; i += 2) {
            ops.add(new AlterConfigOp(new ConfigEntry(keysAndValues[i], keysAndValues[i + 1]), AlterConfigOp.OpType.SET));
            want.put(keysAndValues[i], keysAndValues[i + 1]);
        }
        try (Admin admin = kit.admin()) {
            admin.incrementalAlterConfigs(Map.of(r, ops)).all().get();
            // The change reaches the brokers through the metadata log: a broker may still read
            // the old value for a moment (Kafka: the alter goes to the controller, the describe to
            // any broker).
            long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
            while (true) {
                Config got = admin.describeConfigs(List.of(r)).all().get().get(r);
                List<String> stale = new ArrayList<>();
                for (Map.Entry<String, String> e : want.entrySet()) {
                    ConfigEntry entry = got.get(e.getKey());
                    if (entry == null || !e.getValue().equals(entry.value())) {
                        stale.add(e.getKey() + " reads back as " + (entry == null ? "missing" : entry.value())
                                + ", set " + e.getValue());
                    }
                }
                if (stale.isEmpty()) break;
                check(System.nanoTime() < deadline, "group " + group + " configs after 15 s: " + stale);
                Thread.sleep(100);
            }
        }
    }

    /** Setting a group config out of its bounds must fail: answers the error. */
    Throwable rejectedGroupConfig(String group, String key, String value) throws Exception {
        ConfigResource r = new ConfigResource(ConfigResource.Type.GROUP, group);
        try (Admin admin = kit.admin()) {
            admin.incrementalAlterConfigs(Map.of(r, List.of(new AlterConfigOp(new ConfigEntry(key, value),
                    AlterConfigOp.OpType.SET)))).all().get();
        } catch (java.util.concurrent.ExecutionException e) {
            return e.getCause();
        }
        throw new AssertionError("group config " + key + "=" + value + " was accepted (out of bounds)");
    }

    /** The share group's start offset of each partition of `topic` (ListShareGroupOffsets). */
    Map<TopicPartition, SharePartitionOffsetInfo> startOffsets(String group, String topic, int partitions) throws Exception {
        try (Admin admin = kit.admin()) {
            ListShareGroupOffsetsSpec spec = new ListShareGroupOffsetsSpec().topicPartitions(Kit.partitions(topic, partitions));
            return admin.listShareGroupOffsets(Map.of(group, spec)).partitionsToOffsetInfo(group).get();
        }
    }

    /** Each partition's log end offset. */
    Map<TopicPartition, Long> endOffsets(String topic, int partitions) throws Exception {
        Map<TopicPartition, OffsetSpec> spec = new HashMap<>();
        for (TopicPartition tp : Kit.partitions(topic, partitions)) spec.put(tp, OffsetSpec.latest());
        Map<TopicPartition, Long> out = new TreeMap<>((a, b) -> Integer.compare(a.partition(), b.partition()));
        try (Admin admin = kit.admin()) {
            admin.listOffsets(spec).all().get().forEach((tp, info) -> out.put(tp, info.offset()));
        }
        return out;
    }

    /**
     * Every record of every partition must be acknowledged or archived in the state the share
     * coordinator holds (not what the consumer believes), within `timeout`: ListShareGroupOffsets
     * must answer a lag of 0 for each partition (KIP-1226: log end offset minus the start offset
     * minus the records past it already delivered for good), or, from a broker that answers no
     * lag, a start offset at the log end offset. The start offset alone is no measure: Kafka
     * 4.4 persists it one state write late, so after the last acknowledgement it stays behind
     * (e.g. 0 of 9 with lag 0). Answers "p0 start 0/9 lag 0, ..." for the detail.
     */
    String checkAllAcknowledged(String group, String topic, int partitions, Duration timeout) throws Exception {
        Map<TopicPartition, Long> end = endOffsets(topic, partitions);
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            Map<TopicPartition, SharePartitionOffsetInfo> start = startOffsets(group, topic, partitions);
            List<String> shown = new ArrayList<>();
            boolean all = true;
            for (Map.Entry<TopicPartition, Long> e : end.entrySet()) {
                SharePartitionOffsetInfo info = start.get(e.getKey());
                long s = info == null ? -1 : info.startOffset();
                Optional<Long> lag = info == null ? Optional.empty() : info.lag();
                all &= info != null && (lag.isPresent() ? lag.get() == 0 : s == e.getValue());
                shown.add("p" + e.getKey().partition() + " start " + s + "/" + e.getValue()
                        + lag.map(l -> " lag " + l).orElse(" (no lag)"));
            }
            if (all) return String.join(", ", shown);
            check(System.nanoTime() < deadline, "the share group's offsets do not show every record acknowledged within "
                    + timeout.toSeconds() + " s: " + String.join(", ", shown));
            Thread.sleep(250);
        }
    }

    ShareGroupDescription describe(String group) throws Exception {
        try (Admin admin = kit.admin()) {
            return admin.describeShareGroups(List.of(group)).describedGroups().get(group).get();
        }
    }

    /** The record's delivery count, which a share consumer's records must carry. */
    static short deliveryCount(ConsumerRecord<String, String> r) {
        Optional<Short> dc = r.deliveryCount();
        check(dc.isPresent(), "record " + r.topic() + "-" + r.partition() + "@" + r.offset() + " has no delivery count");
        return dc.get();
    }

    /** Every delivery of every record (by value) and every acknowledgement's outcome. */
    static final class Ledger {
        /** value -> the delivery counts it arrived with, in order. */
        final Map<String, List<Short>> deliveries = new LinkedHashMap<>();
        /** value -> how many of its acknowledgements of each type the broker confirmed. */
        final Map<String, Map<AcknowledgeType, Integer>> confirmed = new HashMap<>();
        /** value -> the error of each acknowledgement commitSync reported failed. */
        final Map<String, List<String>> failed = new LinkedHashMap<>();
        /** Deliveries of a record after its ACCEPT or REJECT was confirmed: never allowed. */
        final List<String> afterFinal = new ArrayList<>();
        /** value -> where it was (partition@offset). */
        final Map<String, String> where = new HashMap<>();

        synchronized void delivered(ConsumerRecord<String, String> r) {
            String v = r.value();
            if (finalized(v)) afterFinal.add(v + " (delivery count " + deliveryCount(r) + ")");
            deliveries.computeIfAbsent(v, k -> new ArrayList<>()).add(deliveryCount(r));
            where.put(v, r.partition() + "@" + r.offset());
        }

        synchronized boolean finalized(String v) {
            Map<AcknowledgeType, Integer> c = confirmed.getOrDefault(v, Map.of());
            return c.getOrDefault(AcknowledgeType.ACCEPT, 0) > 0 || c.getOrDefault(AcknowledgeType.REJECT, 0) > 0;
        }

        synchronized void outcome(String v, AcknowledgeType type, Optional<KafkaException> error) {
            if (error.isPresent()) {
                failed.computeIfAbsent(v, k -> new ArrayList<>()).add(type + ": " + Compat.describe(error.get()));
            } else {
                confirmed.computeIfAbsent(v, k -> new HashMap<>()).merge(type, 1, Integer::sum);
            }
        }

        synchronized int confirmedCount(String v, AcknowledgeType type) {
            return confirmed.getOrDefault(v, Map.of()).getOrDefault(type, 0);
        }

        synchronized List<Short> of(String v) {
            return new ArrayList<>(deliveries.getOrDefault(v, List.of()));
        }

        synchronized int distinct() {
            return deliveries.size();
        }

        synchronized int total() {
            return deliveries.values().stream().mapToInt(List::size).sum();
        }
    }

    /**
     * One poll of an explicit-mode consumer: every record of the batch goes into the ledger and
     * is acknowledged as `decide` says, then commitSync (ackAll). Answers the batch.
     */
    static List<ConsumerRecord<String, String>> pollAck(KafkaShareConsumer<String, String> c, Ledger ledger,
            Function<ConsumerRecord<String, String>, AcknowledgeType> decide, Duration commitTimeout) {
        List<ConsumerRecord<String, String>> records = poll(c, ledger);
        ackAll(c, ledger, records, decide, commitTimeout);
        return records;
    }

    /** One poll; every record goes into the ledger. */
    static List<ConsumerRecord<String, String>> poll(KafkaShareConsumer<String, String> c, Ledger ledger) {
        List<ConsumerRecord<String, String>> records = new ArrayList<>();
        for (ConsumerRecord<String, String> r : c.poll(Kit.POLL)) {
            records.add(r);
            ledger.delivered(r);
        }
        return records;
    }

    /**
     * Acknowledges every record of the last poll as `decide` says, then commitSync(`commitTimeout`);
     * each record's outcome is its partition's result (a partition missing from the result is a
     * failure).
     */
    static void ackAll(KafkaShareConsumer<String, String> c, Ledger ledger, List<ConsumerRecord<String, String>> records,
            Function<ConsumerRecord<String, String>, AcknowledgeType> decide, Duration commitTimeout) {
        if (records.isEmpty()) return;
        Map<ConsumerRecord<String, String>, AcknowledgeType> types = new LinkedHashMap<>();
        for (ConsumerRecord<String, String> r : records) {
            AcknowledgeType t = decide.apply(r);
            c.acknowledge(r, t);
            types.put(r, t);
        }
        Map<TopicIdPartition, Optional<KafkaException>> results = c.commitSync(commitTimeout);
        Map<TopicPartition, Optional<KafkaException>> byPartition = new HashMap<>();
        results.forEach((tip, e) -> byPartition.put(tip.topicPartition(), e));
        for (Map.Entry<ConsumerRecord<String, String>, AcknowledgeType> e : types.entrySet()) {
            ConsumerRecord<String, String> r = e.getKey();
            Optional<KafkaException> result = byPartition.get(new TopicPartition(r.topic(), r.partition()));
            if (result == null) {
                result = Optional.of(new KafkaException("commitSync gave no result for partition " + r.partition()
                        + " (results " + results + ")"));
            }
            ledger.outcome(r.value(), e.getValue(), result);
        }
    }

    /** "3 (e.g. a, b, c)" for a detail. */
    static String sample(java.util.Collection<String> values) {
        if (values.isEmpty()) return "none";
        List<String> sorted = new ArrayList<>(values);
        java.util.Collections.sort(sorted);
        return values.size() + " (e.g. " + String.join(", ", sorted.subList(0, Math.min(3, sorted.size()))) + ")";
    }
}

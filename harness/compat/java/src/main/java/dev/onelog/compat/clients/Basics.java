// Scenarios of the compatibility matrix about topics and plain records: create a topic, produce
// and consume with keys and headers, every compression codec, a new group from earliest and from
// latest, seek by timestamp, alter a topic config, delete records.
package dev.onelog.compat.clients;

import static dev.onelog.compat.Compat.check;

import dev.onelog.compat.Compat;
import dev.onelog.compat.Kit;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;

final class Basics {
    private static final Duration READ_TIMEOUT = Duration.ofSeconds(30);
    private final Compat compat;
    private final Kit kit;

    Basics(Compat compat, Kit kit) {
        this.compat = compat;
        this.kit = kit;
    }

    private String topic(String name) {
        return compat.prefix + "-" + name;
    }

    String createTopic() throws Exception {
        String topic = topic("create");
        kit.createTopic(topic, 3);
        try (Admin admin = kit.admin(); KafkaConsumer<String, String> c = kit.consumer()) {
            // Kafka's Admin.createTopics documents that other brokers may not list a new topic
            // for a while after it returns; a follower here applies it one heartbeat later at
            // most on an idle cluster, later on a starved one (a CI run, 2026-12-06).
            long deadline = System.nanoTime() + READ_TIMEOUT.toNanos();
            boolean listed = admin.listTopics().names().get().contains(topic);
            while (!listed && System.nanoTime() < deadline) {
                Thread.sleep(100);
                listed = admin.listTopics().names().get().contains(topic);
            }
            check(listed, "listTopics does not name " + topic + " within " + READ_TIMEOUT);
            List<PartitionInfo> parts = c.partitionsFor(topic);
            check(parts.size() == 3, "metadata has " + parts.size() + " partitions, want 3");
            for (PartitionInfo p : parts) {
                check(p.leader() != null && p.leader().id() >= 0, "partition " + p.partition() + " has no leader");
            }
        }
        return "3 partitions in metadata, each with a leader";
    }

    String produceConsume() throws Exception {
        String topic = topic("records");
        kit.createTopic(topic, 3);
        int n = 30;
        try (KafkaProducer<String, String> p = kit.producer()) {
            for (int i = 0; i < n; i++) {
                ProducerRecord<String, String> r = new ProducerRecord<>(topic, "key-" + i, "value-" + i);
                r.headers().add("h-index", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                r.headers().add("h-empty", new byte[0]);
                p.send(r);
            }
            p.flush();
        }
        List<ConsumerRecord<String, String>> got = kit.readAll(topic, 3, "read_uncommitted", READ_TIMEOUT);
        check(got.size() == n, "read " + got.size() + " records, want " + n);
        Set<Integer> seen = new HashSet<>();
        for (ConsumerRecord<String, String> r : got) {
            int i = Integer.parseInt(r.key().substring("key-".length()));
            check(r.value().equals("value-" + i), "key " + r.key() + " has value " + r.value());
            Header[] hs = r.headers().toArray();
            check(hs.length == 2, "record " + i + " has " + hs.length + " headers, want 2");
            check(hs[0].key().equals("h-index") && new String(hs[0].value(), StandardCharsets.UTF_8).equals("" + i),
                    "record " + i + " header 0 is " + hs[0]);
            check(hs[1].key().equals("h-empty") && hs[1].value().length == 0, "record " + i + " header 1 is " + hs[1]);
            seen.add(i);
        }
        check(seen.size() == n, "distinct records " + seen.size() + ", want " + n);
        return n + " records over 3 partitions, keys, values and 2 headers exact";
    }

    String compression() throws Exception {
        List<String> covered = new ArrayList<>();
        for (String codec : List.of("gzip", "snappy", "lz4", "zstd")) {
            String topic = topic("codec-" + codec);
            kit.createTopic(topic, 1);
            List<String> values = Kit.numbered(codec + "-value-", 50);
            try (KafkaProducer<String, String> p = kit.producer("compression.type", codec, "linger.ms", "50")) {
                Kit.sendAll(p, topic, values);
            }
            List<ConsumerRecord<String, String>> got = kit.readAll(topic, 1, "read_uncommitted", READ_TIMEOUT);
            check(Kit.values(got).equals(values), codec + ": read " + Kit.values(got));
            for (ConsumerRecord<String, String> r : got) {
                check(r.key().equals("k-" + r.value()), codec + ": key " + r.key() + " for " + r.value());
            }
            covered.add(codec);
        }
        return "codecs " + String.join(",", covered) + ": 50 records each exact";
    }

    String consumeEarliest() throws Exception {
        String topic = topic("earliest");
        kit.createTopic(topic, 3);
        List<String> values = Kit.numbered("e", 30);
        try (KafkaProducer<String, String> p = kit.producer()) {
            Kit.sendAll(p, topic, values);
        }
        try (KafkaConsumer<String, String> c = kit.consumer("group.id", topic + "-g", "auto.offset.reset", "earliest")) {
            c.subscribe(List.of(topic));
            Set<String> got = pollValues(c, values.size());
            check(got.equals(new HashSet<>(values)), "group read " + got);
        }
        return "new group read all 30 records";
    }

    String consumeLatest() throws Exception {
        String topic = topic("latest");
        kit.createTopic(topic, 3);
        try (KafkaProducer<String, String> p = kit.producer()) {
            Kit.sendAll(p, topic, Kit.numbered("old", 15));
            try (KafkaConsumer<String, String> c = kit.consumer("group.id", topic + "-g", "auto.offset.reset", "latest")) {
                c.subscribe(List.of(topic));
                long deadline = System.nanoTime() + READ_TIMEOUT.toNanos();
                while (c.assignment().size() < 3) {
                    check(System.nanoTime() < deadline, "assignment " + c.assignment());
                    check(c.poll(Kit.POLL).isEmpty(), "records before any was produced after joining");
                }
                // position() resolves the reset to latest now, before the new records exist.
                Map<TopicPartition, Long> end = c.endOffsets(c.assignment());
                for (TopicPartition tp : c.assignment()) {
                    check(c.position(tp) == end.get(tp), "position of " + tp + " " + c.position(tp) + ", end " + end.get(tp));
                }
                List<String> fresh = Kit.numbered("new", 15);
                Kit.sendAll(p, topic, fresh);
                Set<String> got = pollValues(c, fresh.size());
                check(got.equals(new HashSet<>(fresh)), "latest group read " + got);
            }
        }
        return "new group with latest read exactly the 15 records produced after joining";
    }

    /** Polls until `n` records came (failing on more or on the deadline); their values. */
    static Set<String> pollValues(KafkaConsumer<String, String> c, int n) {
        Set<String> got = new HashSet<>();
        int count = 0;
        long deadline = System.nanoTime() + READ_TIMEOUT.toNanos();
        while (count < n) {
            check(System.nanoTime() < deadline, "read " + count + " of " + n + " records: " + got);
            for (ConsumerRecord<String, String> r : c.poll(Kit.POLL)) {
                got.add(r.value());
                count++;
            }
        }
        // Nothing beyond: a short extra poll must stay empty.
        int extra = c.poll(Duration.ofMillis(500)).count();
        check(extra == 0, extra + " records beyond the " + n + " expected");
        check(got.size() == n, "duplicates among " + count + " records");
        return got;
    }

    String seekTimestamp() throws Exception {
        String topic = topic("timestamps");
        kit.createTopic(topic, 1);
        TopicPartition tp = new TopicPartition(topic, 0);
        long base = System.currentTimeMillis() - 3_600_000;
        try (KafkaProducer<String, String> p = kit.producer()) {
            for (int i = 0; i < 10; i++) p.send(new ProducerRecord<>(topic, 0, base + i * 1000L, "k" + i, "t" + i));
            p.flush();
        }
        try (KafkaConsumer<String, String> c = kit.consumer()) {
            c.assign(List.of(tp));
            // Between the timestamps of records 5 and 6: the first record at or after is 6.
            Map<TopicPartition, OffsetAndTimestamp> found = c.offsetsForTimes(Map.of(tp, base + 5500L));
            OffsetAndTimestamp at = found.get(tp);
            check(at != null, "offsetsForTimes found nothing");
            check(at.offset() == 6 && at.timestamp() == base + 6000L, "offsetsForTimes gave " + at);
            c.seek(tp, at.offset());
            ConsumerRecord<String, String> first = null;
            long deadline = System.nanoTime() + READ_TIMEOUT.toNanos();
            while (first == null) {
                check(System.nanoTime() < deadline, "nothing read after the seek");
                for (ConsumerRecord<String, String> r : c.poll(Kit.POLL)) if (first == null) first = r;
            }
            check(first.offset() == 6 && first.value().equals("t6") && first.timestamp() == base + 6000L,
                    "first record after the seek " + first);
            Map<TopicPartition, OffsetAndTimestamp> past = c.offsetsForTimes(Map.of(tp, base + 60_000L));
            check(past.get(tp) == null, "a timestamp after every record gave " + past.get(tp));
        }
        return "offsetsForTimes(ts between records 5 and 6) = offset 6, seek read t6; past the end = none";
    }

    String alterConfig() throws Exception {
        String topic = topic("config");
        kit.createTopic(topic, 1);
        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
        try (Admin admin = kit.admin()) {
            AlterConfigOp op = new AlterConfigOp(new ConfigEntry("retention.ms", "7654321"), AlterConfigOp.OpType.SET);
            admin.incrementalAlterConfigs(Map.of(res, List.of(op))).all().get();
            Config config = admin.describeConfigs(List.of(res)).all().get().get(res);
            ConfigEntry entry = config.get("retention.ms");
            check(entry != null && "7654321".equals(entry.value()), "retention.ms reads back as " + entry);
            check(entry.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, "retention.ms source " + entry.source());
        }
        return "incrementalAlterConfigs retention.ms=7654321, describeConfigs reads it back (DYNAMIC_TOPIC_CONFIG)";
    }

    String deleteRecords() throws Exception {
        String topic = topic("delete");
        kit.createTopic(topic, 1);
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaProducer<String, String> p = kit.producer()) {
            Kit.sendAll(p, topic, Kit.numbered("d", 10));
        }
        try (Admin admin = kit.admin()) {
            long low = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(4))).lowWatermarks().get(tp).get()
                    .lowWatermark();
            check(low == 4, "deleteRecords low watermark " + low);
            long earliest = admin.listOffsets(Map.of(tp, OffsetSpec.earliest())).partitionResult(tp).get().offset();
            check(earliest == 4, "earliest offset after deleteRecords " + earliest);
        }
        List<ConsumerRecord<String, String>> got = kit.readAll(topic, 1, "read_uncommitted", READ_TIMEOUT);
        check(!got.isEmpty() && got.get(0).offset() == 4, "first record from earliest " + (got.isEmpty() ? "none" : got.get(0)));
        check(Kit.values(got).equals(Kit.numbered("d", 10).subList(4, 10)), "read from earliest " + Kit.values(got));
        return "deleteRecords before 4: low watermark 4, earliest 4, consuming starts at d4";
    }
}

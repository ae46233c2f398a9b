// Share-group throughput and acknowledgement latency (KIP-932), the client half of
// scripts/bench-share.sh: against one running cluster (onelog or Apache Kafka), creates a topic
// (--partitions, replication factor 3), produces --records records of --record-bytes bytes to it
// round-robin over the partitions (acks=all, idempotent, linger.ms=5, batch.size=65536), then
// for each count of --consumers runs ShareBenchRun: that many KafkaShareConsumer members,
// threads of this JVM, in a fresh share group consume every record exactly once with explicit
// acknowledgement (ACCEPT, commitSync after every poll). Before the first measured run, an
// unmeasured warm-up group of one member consumes --warmup-records (JIT, client and brokers).
//
// Each group gets the same configs, set with Admin.incrementalAlterConfigs on its GROUP resource
// before any member joins and read back (--group-config, default share.auto.offset.reset=earliest
// and Kafka 4.4's defaults for the lock duration and the delivery count limit, set explicitly).
// After a run, ListShareGroupOffsets must show every partition with lag 0 (not counted).
//
// Usage: ShareBench --bootstrap=HOSTS [--topic=share-bench] [--records=200000]
//   [--record-bytes=1024] [--partitions=4] [--consumers=1,4] [--warmup-records=20000]
//   [--broker-pids=PID,PID,PID --clk-tck=100] [--group-config=k=v,k=v] [--client=k=v ...]
//   [--timeout-s=600]
// stdout: one JSON line per event ("setup", "warmup", one "run" per consumer count); a failure
// prints {"event":"error","detail":...} and exits 1. Progress goes to stderr.
package dev.onelog.compat.share;

import dev.onelog.compat.Compat;
import dev.onelog.compat.Kit;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class ShareBench {
    /** Kafka 4.4's group defaults, set explicitly so both systems run with the same values. */
    private static final String GROUP_CONFIGS_DEFAULT =
            "share.auto.offset.reset=earliest,share.record.lock.duration.ms=30000,share.delivery.count.limit=5";
    private static final short REPLICATION_FACTOR = 3;

    /** The command line, as an options struct. */
    record Options(String bootstrap, String topic, long records, int recordBytes, int partitions,
            List<Integer> consumers, long warmupRecords, List<Long> brokerPids, long clkTck,
            List<String> groupConfigs, List<String> clientConfigs, Duration timeout) {

        static Options parse(String[] argv) {
            Map<String, String> one = new HashMap<>();
            List<String> clients = new ArrayList<>();
            for (String a : argv) {
                int eq = a.indexOf('=');
                if (!a.startsWith("--") || eq < 0) throw new IllegalArgumentException("argument " + a + ": --key=value");
                String key = a.substring(2, eq);
                if (key.equals("client")) clients.add(a.substring(eq + 1));
                else one.put(key, a.substring(eq + 1));
            }
            String bootstrap = one.remove("bootstrap");
            if (bootstrap == null) throw new IllegalArgumentException("--bootstrap=HOSTS is required");
            Options o = new Options(bootstrap, one.getOrDefault("topic", "share-bench"),
                    Long.parseLong(one.getOrDefault("records", "200000")),
                    Integer.parseInt(one.getOrDefault("record-bytes", "1024")),
                    Integer.parseInt(one.getOrDefault("partitions", "4")),
                    Arrays.stream(one.getOrDefault("consumers", "1,4").split(",")).map(Integer::valueOf).toList(),
                    Long.parseLong(one.getOrDefault("warmup-records", "20000")),
                    Arrays.stream(one.getOrDefault("broker-pids", "").split(",")).filter(s -> !s.isEmpty())
                            .map(Long::valueOf).toList(),
                    Long.parseLong(one.getOrDefault("clk-tck", "100")),
                    List.of(one.getOrDefault("group-config", GROUP_CONFIGS_DEFAULT).split(",")),
                    clients, Duration.ofSeconds(Long.parseLong(one.getOrDefault("timeout-s", "600"))));
            for (String k : List.of("topic", "records", "record-bytes", "partitions", "consumers", "warmup-records",
                    "broker-pids", "clk-tck", "group-config", "timeout-s")) one.remove(k);
            if (!one.isEmpty()) throw new IllegalArgumentException("unknown arguments " + one.keySet());
            return o;
        }
    }

    private ShareBench() {}

    public static void main(String[] argv) {
        try {
            bench(Options.parse(argv));
            System.exit(0);
        } catch (Throwable t) {
            t.printStackTrace();
            println(obj("event", "error", "detail", Compat.describe(t)));
            System.exit(1);
        }
    }

    private static void bench(Options o) throws Exception {
        Kit kit = new Kit(o.bootstrap());
        ShareKit share = new ShareKit(new Compat("share-bench", Compat.kafkaVersion()), kit);
        String shareVersion = shareVersion(kit);
        createTopic(kit, o);
        double produceS = produce(kit, o);
        Map<Integer, Long> end = endOffsets(kit, o);
        long total = end.values().stream().mapToLong(Long::longValue).sum();
        check(total == o.records(), "the topic holds " + total + " records, " + o.records() + " produced: " + end);
        println(obj("event", "setup", "kafka_clients", Compat.kafkaVersion(), "share_version", shareVersion,
                "topic", o.topic(), "partitions", o.partitions(), "leaders", leaders(kit, o), "records", o.records(),
                "record_bytes", o.recordBytes(), "produce_s", round(produceS, 2), "client_configs", o.clientConfigs()));
        if (o.warmupRecords() > 0) {
            String group = o.topic() + "-warmup";
            configure(share, kit, group, o);
            log("warm-up: 1 member, " + Math.min(o.warmupRecords(), o.records()) + " records, group " + group);
            ShareBenchRun.Result r = ShareBenchRun.run(spec(kit, o, group, 1, Math.min(o.warmupRecords(), o.records())), end);
            println(obj("event", "warmup", "records", r.ledger().accepted(), "seconds", round(r.seconds(), 3)));
        }
        for (int members : o.consumers()) {
            String group = o.topic() + "-c" + members;
            Map<String, String> configs = configure(share, kit, group, o);
            log(members + " member(s): " + o.records() + " records, group " + group);
            ShareBenchRun.Result r = ShareBenchRun.run(spec(kit, o, group, members, o.records()), end);
            String offsets = share.checkAllAcknowledged(group, o.topic(), o.partitions(), Duration.ofSeconds(60));
            Map<String, Object> line = report(o, members, group, r);
            line.put("coordinator", share.describe(group).coordinator().id());
            line.put("offsets", offsets);
            line.put("group_configs", configs);
            println(line);
        }
    }

    private static ShareBenchRun.Spec spec(Kit kit, Options o, String group, int members, long target) {
        return new ShareBenchRun.Spec(kit.common(), o.clientConfigs(), o.topic(), o.partitions(), group, members,
                target, o.timeout(), o.brokerPids(), o.clkTck());
    }

    /** The run's JSON line; the exactly-once checks fail the run instead. */
    private static Map<String, Object> report(Options o, int members, String group, ShareBenchRun.Result r) {
        ShareBenchRun.Ledger l = r.ledger();
        check(l.accepted() == o.records() && l.acceptedTwice == 0 && l.afterAccept == 0 && l.unknown == 0,
                "not exactly once: " + l.accepted() + " of " + o.records() + " accepted; " + l.summary());
        long[] ns = r.commitNs();
        double bytes = (double) o.records() * o.recordBytes();
        List<Object> cpu = new ArrayList<>();
        for (double s : r.brokerCpuS()) cpu.add(round(s, 3));
        List<Object> perMember = new ArrayList<>();
        for (long n : r.perMember()) perMember.add(n);
        return obj("event", "run", "consumers", members, "group", group, "records", o.records(),
                "record_bytes", o.recordBytes(), "seconds", round(r.seconds(), 3),
                "records_per_s", round(o.records() / r.seconds(), 1), "mb_per_s", round(bytes / 1e6 / r.seconds(), 2),
                "commits", ns.length, "records_per_commit", round((double) o.records() / Math.max(1, ns.length), 1),
                "commit_ms_p50", ms(percentile(ns, 50)), "commit_ms_p99", ms(percentile(ns, 99)),
                "commit_ms_max", ms(ns.length == 0 ? 0 : ns[ns.length - 1]),
                "deliveries", l.deliveries, "redeliveries", l.redeliveries,
                "delivery_count_above_1", l.deliveryCountAbove1, "delivery_count_max", (int) l.deliveryCountMax,
                "ack_failures", l.ackFailures, "per_member", perMember, "settle_s", round(r.settleSeconds(), 2),
                "assignment", r.assignment(), "broker_cpu_s", cpu, "client_cpu_s", round(r.clientCpuS(), 3));
    }

    /** Nearest rank of the sorted `ns`. */
    private static long percentile(long[] ns, double p) {
        if (ns.length == 0) return 0;
        int rank = (int) Math.ceil(p / 100 * ns.length);
        return ns[Math.max(0, Math.min(ns.length, rank) - 1)];
    }

    private static double ms(long ns) {
        return round(ns / 1e6, 3);
    }

    private static double round(double v, int places) {
        double f = Math.pow(10, places);
        return Math.round(v * f) / f;
    }

    /** The finalized share.version, or "none" (share groups off). */
    private static String shareVersion(Kit kit) throws Exception {
        try (Admin admin = kit.admin()) {
            FinalizedVersionRange v = admin.describeFeatures().featureMetadata().get().finalizedFeatures().get("share.version");
            return v == null ? "none" : String.valueOf(v.maxVersionLevel());
        }
    }

    private static void createTopic(Kit kit, Options o) throws Exception {
        try (Admin admin = kit.admin()) {
            admin.createTopics(List.of(new NewTopic(o.topic(), o.partitions(), REPLICATION_FACTOR))).all().get();
        }
    }

    /** Produces the records round-robin over the partitions; answers the seconds it took. */
    private static double produce(Kit kit, Options o) throws Exception {
        Properties p = kit.common();
        p.put("acks", "all");
        p.put("linger.ms", "5");
        p.put("batch.size", "65536");
        p.put("delivery.timeout.ms", "120000");
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        byte[] value = new byte[o.recordBytes()];
        new Random(932).nextBytes(value);
        AtomicLong acked = new AtomicLong();
        AtomicReference<Exception> error = new AtomicReference<>();
        log("producing " + o.records() + " records of " + o.recordBytes() + " bytes to " + o.topic());
        long t0 = System.nanoTime();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            for (long i = 0; i < o.records() && error.get() == null; i++) {
                producer.send(new ProducerRecord<>(o.topic(), (int) (i % o.partitions()), null, value), (md, e) -> {
                    if (e != null) error.compareAndSet(null, e);
                    else acked.incrementAndGet();
                });
            }
            producer.flush();
        }
        if (error.get() != null) throw error.get();
        check(acked.get() == o.records(), acked.get() + " of " + o.records() + " records acknowledged");
        return (System.nanoTime() - t0) / 1e9;
    }

    /** Each partition's leader node id, in partition order. */
    private static List<Integer> leaders(Kit kit, Options o) throws Exception {
        try (Admin admin = kit.admin()) {
            return admin.describeTopics(List.of(o.topic())).allTopicNames().get().get(o.topic()).partitions().stream()
                    .sorted((a, b) -> Integer.compare(a.partition(), b.partition()))
                    .map(p -> p.leader() == null ? -1 : p.leader().id()).toList();
        }
    }

    private static Map<Integer, Long> endOffsets(Kit kit, Options o) throws Exception {
        Map<TopicPartition, OffsetSpec> spec = new HashMap<>();
        for (int i = 0; i < o.partitions(); i++) spec.put(new TopicPartition(o.topic(), i), OffsetSpec.latest());
        Map<Integer, Long> out = new TreeMap<>();
        try (Admin admin = kit.admin()) {
            admin.listOffsets(spec).all().get().forEach((tp, info) -> out.put(tp.partition(), info.offset()));
        }
        return out;
    }

    /** Sets the group's configs (ShareKit.groupConfigs reads them back); answers its share.* configs. */
    private static Map<String, String> configure(ShareKit share, Kit kit, String group, Options o) throws Exception {
        List<String> kv = new ArrayList<>();
        for (String c : o.groupConfigs()) {
            int eq = c.indexOf('=');
            kv.add(c.substring(0, eq));
            kv.add(c.substring(eq + 1));
        }
        share.groupConfigs(group, kv.toArray(new String[0]));
        ConfigResource r = new ConfigResource(ConfigResource.Type.GROUP, group);
        Map<String, String> out = new TreeMap<>();
        try (Admin admin = kit.admin()) {
            Config got = admin.describeConfigs(List.of(r)).all().get().get(r);
            for (ConfigEntry e : got.entries()) if (e.name().startsWith("share.")) out.put(e.name(), e.value());
        }
        return out;
    }

    private static void check(boolean condition, String message) {
        if (!condition) throw new IllegalStateException(message);
    }

    private static void log(String message) {
        System.err.println("share-bench: " + message);
    }

    // A minimal JSON writer for the event lines (numbers, strings, lists, maps).

    private static Map<String, Object> obj(Object... keysAndValues) {
        Map<String, Object> map = new LinkedHashMap<>();
        for (int i = 0; i + 1 < keysAndValues.length; i += 2) map.put((String) keysAndValues[i], keysAndValues[i + 1]);
        return map;
    }

    private static void println(Object value) {
        StringBuilder out = new StringBuilder();
        write(out, value);
        System.out.println(out);
        System.out.flush();
    }

    private static void write(StringBuilder out, Object value) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof Number || value instanceof Boolean) {
            out.append(value);
        } else if (value instanceof Map<?, ?> map) {
            out.append('{');
            String sep = "";
            for (Map.Entry<?, ?> e : map.entrySet()) {
                out.append(sep);
                string(out, String.valueOf(e.getKey()));
                out.append(':');
                write(out, e.getValue());
                sep = ",";
            }
            out.append('}');
        } else if (value instanceof Collection<?> items) {
            out.append('[');
            String sep = "";
            for (Object item : items) {
                out.append(sep);
                write(out, item);
                sep = ",";
            }
            out.append(']');
        } else {
            string(out, value.toString());
        }
    }

    private static void string(StringBuilder out, String s) {
        out.append('"');
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') out.append('\\').append(c);
            else if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
            else out.append(c);
        }
        out.append('"');
    }
}

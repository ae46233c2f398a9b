// Client set-up shared by the JVM drivers: producer, consumer and admin settings, topic creation
// with the small segment size the matrix needs, and reading a topic back to its end. Only API
// present in kafka-clients 2.8, 3.9 and 4.4 (the clients driver compiles against all three).
package dev.onelog.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.stream.Collectors;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class Kit {
    /** Every topic's segment size, Kafka's minimum, so segments roll early (no longer a disk need). */
    public static final String SEGMENT_BYTES = "1048576";
    /** Replication factor of every topic: one replica per node of the three-node cluster. */
    public static final short REPLICATION_FACTOR = 3;
    /** How long one poll waits; short, so loops notice their deadlines. */
    public static final Duration POLL = Duration.ofMillis(200);

    private final String bootstrap;
    private final Security security;

    public Kit(String bootstrap) {
        this(bootstrap, Security.fromEnv());
    }

    /** A Kit whose clients connect with `security` instead of the environment's. */
    public Kit(String bootstrap, Security security) {
        this.bootstrap = bootstrap;
        this.security = security;
    }

    public Properties common() {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("request.timeout.ms", "15000");
        p.putAll(security.properties());
        return p;
    }

    /** A String/String producer, acks=all, with `extra` settings as alternating keys and values. */
    public KafkaProducer<String, String> producer(String... extra) {
        Properties p = common();
        p.put("acks", "all");
        p.put("linger.ms", "5");
        p.put("delivery.timeout.ms", "30000");
        p.put("max.block.ms", "20000");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        put(p, extra);
        return new KafkaProducer<>(p);
    }

    /**
     * Settings of the classic group protocol that a consumer-protocol (KIP-848) consumer must not
     * set: Kafka rejects them (the broker owns the session timeout, the heartbeat interval and the
     * assignor, chosen with group.remote.assignor).
     */
    private static final List<String> CLASSIC_ONLY = List.of("session.timeout.ms", "heartbeat.interval.ms",
            "partition.assignment.strategy");

    /**
     * A String/String consumer without auto-commit; group and reset come from `extra`. A group
     * consumer uses Compat.GROUP_PROTOCOL: with "consumer" it gets group.protocol=consumer and
     * the classic-only settings of `extra` are left out.
     */
    public KafkaConsumer<String, String> consumer(String... extra) {
        Properties p = common();
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        put(p, extra);
        if (Compat.consumerProtocol() && p.containsKey("group.id")) {
            p.put("group.protocol", "consumer");
            CLASSIC_ONLY.forEach(p::remove);
            String assignor = System.getenv("COMPAT_GROUP_REMOTE_ASSIGNOR");
            if (assignor != null && !assignor.isEmpty()) p.put("group.remote.assignor", assignor);
        }
        return new KafkaConsumer<>(p);
    }

    public Admin admin() {
        return Admin.create(common());
    }

    private static void put(Properties p, String... keysAndValues) {
        for (int i = 0; i + 1 < keysAndValues.length; i += 2) p.put(keysAndValues[i], keysAndValues[i + 1]);
    }

    /** Creates `topic` with `partitions` partitions and the small segment size; waits for it. */
    public void createTopic(String topic, int partitions) throws Exception {
        try (Admin admin = admin()) {
            NewTopic t = new NewTopic(topic, partitions, REPLICATION_FACTOR)
                    .configs(Map.of("segment.bytes", SEGMENT_BYTES));
            admin.createTopics(List.of(t)).all().get();
        }
    }

    /** Creates `topic` as above and produces `values` to it (keys "k-" + value), acks=all. */
    public void createTopic(String topic, int partitions, List<String> values) throws Exception {
        createTopic(topic, partitions);
        try (KafkaProducer<String, String> p = producer()) {
            sendAll(p, topic, values);
        }
    }

    public static List<TopicPartition> partitions(String topic, int count) {
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < count; i++) tps.add(new TopicPartition(topic, i));
        return tps;
    }

    /**
     * Every record of `topic` (partitions 0..count-1) from the beginning to the high watermarks
     * seen when reading starts, as the given isolation level sees them. The target is the high
     * watermark even for read_committed: Kafka writes transaction markers after EndTxn returns,
     * so the last stable offset may still lag a just-committed transaction; a read_committed
     * position reaches the high watermark only once every transaction below it is decided.
     * Records come partition by partition, in offset order.
     */
    public List<ConsumerRecord<String, String>> readAll(String topic, int count, String isolation, Duration timeout) {
        List<TopicPartition> tps = partitions(topic, count);
        Map<TopicPartition, Long> end;
        try (KafkaConsumer<String, String> uncommitted = consumer()) {
            end = uncommitted.endOffsets(tps);
        }
        try (KafkaConsumer<String, String> c = consumer("isolation.level", isolation)) {
            c.assign(tps);
            c.seekToBeginning(tps);
            List<ConsumerRecord<String, String>> out = new ArrayList<>();
            long deadline = System.nanoTime() + timeout.toNanos();
            while (!reached(c, end)) {
                Compat.check(System.nanoTime() < deadline, "reading " + topic + " did not reach end offsets " + end
                        + " (positions " + positions(c, tps) + ")");
                for (ConsumerRecord<String, String> r : c.poll(POLL)) out.add(r);
            }
            out.sort((a, b) -> a.partition() != b.partition() ? Integer.compare(a.partition(), b.partition())
                    : Long.compare(a.offset(), b.offset()));
            return out;
        }
    }

    private static boolean reached(KafkaConsumer<?, ?> c, Map<TopicPartition, Long> end) {
        for (Map.Entry<TopicPartition, Long> e : end.entrySet()) {
            if (c.position(e.getKey()) < e.getValue()) return false;
        }
        return true;
    }

    private static Map<TopicPartition, Long> positions(KafkaConsumer<?, ?> c, List<TopicPartition> tps) {
        return tps.stream().collect(Collectors.toMap(tp -> tp, c::position));
    }

    public static List<String> values(List<ConsumerRecord<String, String>> records) {
        return records.stream().map(ConsumerRecord::value).collect(Collectors.toList());
    }

    /** Sends every value with its key and waits for every acknowledgement. */
    public static void sendAll(KafkaProducer<String, String> p, String topic, List<String> values) throws Exception {
        List<java.util.concurrent.Future<?>> acks = new ArrayList<>();
        for (String v : values) acks.add(p.send(new org.apache.kafka.clients.producer.ProducerRecord<>(topic, "k-" + v, v)));
        for (java.util.concurrent.Future<?> f : acks) f.get();
    }

    /** "prefix0".."prefix(n-1)". */
    public static List<String> numbered(String prefix, int n) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < n; i++) out.add(prefix + i);
        return Collections.unmodifiableList(out);
    }

    /** The cause chain holds an exception of one of `types`. */
    @SafeVarargs
    public static boolean causedBy(Throwable t, Class<? extends Throwable>... types) {
        for (Throwable c = t; c != null; c = c.getCause() == c ? null : c.getCause()) {
            for (Class<? extends Throwable> type : types) if (type.isInstance(c)) return true;
        }
        return false;
    }
}

// streams_standby_static (StreamsDriver runs it under both group protocols): standby tasks and
// static membership of a Kafka Streams application. Two instances (in this JVM, own state
// directories, exactly_once_v2, default handlers) of a per-key count, each with a
// group.instance.id and one standby replica per task: streams.num.standby.replicas=1 as a group
// config on the Streams protocol, num.standby.replicas=1 as a Streams config on the classic one.
// Every task must run active on one instance and standby on the other. Then one instance is
// closed and restarted under its instance id within the session: it must get back exactly the
// active and standby tasks it had. The counts must be exact.
package dev.onelog.compat.streams;

import static dev.onelog.compat.Compat.check;

import dev.onelog.compat.Compat;
import dev.onelog.compat.Kit;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;

final class StandbyStatic {
    static final String ID = "streams_standby_static";
    private static final int PARTITIONS = 4;
    private static final int KEYS = 8;
    private static final int PER_KEY = 25;

    private final StreamsDriver d;
    private final Compat compat;
    private final Kit kit;

    StandbyStatic(StreamsDriver d, Compat compat, Kit kit) {
        this.d = d;
        this.compat = compat;
        this.kit = kit;
    }

    String run() throws Exception {
        String app = compat.prefix + "-standby-app";
        String input = compat.prefix + "-standby-in";
        String output = compat.prefix + "-standby-out";
        kit.createTopic(input, PARTITIONS);
        kit.createTopic(output, PARTITIONS);
        d.streamsGroupTimeouts(app);
        standbyGroupConfig(app);
        Path dir = Files.createTempDirectory("compat-standby");
        List<KafkaStreams> instances = new ArrayList<>(List.of(start(app, input, output, dir, 1), start(app, input, output, dir, 2)));
        try {
            produce(input, 0, KEYS * PER_KEY / 2);
            Map<String, String> before = placed(instances);
            produce(input, KEYS * PER_KEY / 2, KEYS * PER_KEY);
            instances.get(1).close(Duration.ofSeconds(20));
            instances.set(1, start(app, input, output, dir, 2));
            Map<String, String> after = placed(instances);
            check(after.equals(before), "the restarted static instance got other tasks: " + before + " then " + after);
            Map<String, Long> counts = counts(output);
            for (int k = 0; k < KEYS; k++) {
                check(counts.getOrDefault("k" + k, 0L) == PER_KEY, "count of k" + k + ": " + counts);
            }
            return "every task active on one instance and standby on the other " + before
                    + "; a static instance restarted got the same tasks back; counts exact (" + KEYS + " keys x " + PER_KEY + ")";
        } finally {
            for (KafkaStreams k : instances) k.close(Duration.ofSeconds(20));
        }
    }

    /** One standby replica per task: a group config on the Streams protocol. */
    private void standbyGroupConfig(String app) throws Exception {
        if (!WordCountApp.streamsProtocol()) return;
        ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, app);
        AlterConfigOp op = new AlterConfigOp(new ConfigEntry("streams.num.standby.replicas", "1"), AlterConfigOp.OpType.SET);
        try (Admin admin = kit.admin()) {
            admin.incrementalAlterConfigs(Map.of(group, List.of(op))).all().get(30, TimeUnit.SECONDS);
        }
    }

    private KafkaStreams start(String app, String input, String output, Path dir, int i) {
        Properties p = new Properties();
        p.putAll(kit.common());
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, dir.resolve("instance-" + i).toString());
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.consumerPrefix("group.instance.id"), app + "-instance-" + i);
        if (WordCountApp.streamsProtocol()) {
            p.put("group.protocol", "streams");
        } else {
            p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, 1);
            p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 6000);
            p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1500);
        }
        StreamsBuilder b = new StreamsBuilder();
        b.<String, String>stream(input).groupByKey().count().toStream().mapValues(Object::toString).to(output);
        KafkaStreams k = new KafkaStreams(b.build(), p);
        k.start();
        return k;
    }

    private void produce(String input, int from, int to) throws Exception {
        try (KafkaProducer<String, String> p = kit.producer()) {
            for (int i = from; i < to; i++) p.send(new ProducerRecord<>(input, "k" + (i % KEYS), "v" + i)).get();
        }
    }

    /**
     * Waits until both instances run and every task is active on one and standby on the other;
     * then "instance -> active / standby" for each.
     */
    private Map<String, String> placed(List<KafkaStreams> instances) throws Exception {
        long deadline = d.deadline();
        String last = "";
        while (System.nanoTime() < deadline) {
            Map<String, String> placed = new TreeMap<>();
            TreeSet<String> active = new TreeSet<>();
            TreeSet<String> standby = new TreeSet<>();
            boolean ok = true;
            for (int i = 0; i < instances.size(); i++) {
                KafkaStreams k = instances.get(i);
                TreeSet<String> a = new TreeSet<>();
                TreeSet<String> s = new TreeSet<>();
                for (ThreadMetadata t : k.metadataForLocalThreads()) {
                    t.activeTasks().forEach(x -> a.add(x.taskId().toString()));
                    t.standbyTasks().forEach(x -> s.add(x.taskId().toString()));
                }
                ok &= k.state() == KafkaStreams.State.RUNNING && !a.isEmpty() && java.util.Collections.disjoint(a, s);
                ok &= active.addAll(a) && standby.addAll(s);
                placed.put("instance-" + (i + 1), a + " / " + s);
            }
            last = placed.toString();
            if (ok && active.size() == PARTITIONS && active.equals(standby)) return placed;
            Thread.sleep(200);
        }
        throw new AssertionError("tasks never placed active once and standby once: " + last);
    }

    private Map<String, Long> counts(String output) throws Exception {
        long deadline = d.deadline();
        Map<String, Long> counts = new TreeMap<>();
        while (System.nanoTime() < deadline) {
            List<ConsumerRecord<String, String>> records =
                    kit.readAll(output, PARTITIONS, "read_committed", Duration.ofSeconds(10));
            counts.clear();
            for (ConsumerRecord<String, String> r : records) counts.put(r.key(), Long.parseLong(r.value()));
            if (counts.values().stream().filter(c -> c == PER_KEY).count() == KEYS) return counts;
            Thread.sleep(500);
        }
        return counts;
    }
}

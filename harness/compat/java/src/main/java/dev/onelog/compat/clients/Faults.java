// Scenarios of the compatibility matrix about failures: a kill -9 of the Raft leader while
// producing and consuming (nothing acknowledged may be lost), a produce to a missing topic with
// auto-create off, and a fetch past the end with no reset policy.
package dev.onelog.compat.clients;

import static dev.onelog.compat.Compat.check;

import dev.onelog.compat.Compat;
import dev.onelog.compat.Kit;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

final class Faults {
    /** How long records flow before and after the kill. */
    private static final Duration FLOW = Duration.ofSeconds(2);
    private final Compat compat;
    private final Kit kit;

    Faults(Compat compat, Kit kit) {
        this.compat = compat;
        this.kit = kit;
    }

    String leaderKill() throws Exception {
        String topic = compat.prefix + "-leader-kill";
        kit.createTopic(topic, 3);
        Set<String> acked = ConcurrentHashMap.newKeySet();
        AtomicInteger failed = new AtomicInteger();
        AtomicInteger consumed = new AtomicInteger();
        AtomicBoolean stop = new AtomicBoolean();
        AtomicReference<Throwable> crash = new AtomicReference<>();
        Thread producer = new Thread(() -> {
            try (KafkaProducer<String, String> p = kit.producer("enable.idempotence", "true", "retries", "2147483647")) {
                for (int i = 0; !stop.get(); i++) {
                    String v = "lk" + i;
                    p.send(new ProducerRecord<>(topic, v, v), (md, e) -> {
                        if (e == null) acked.add(v);
                        else failed.incrementAndGet();
                    });
                    Thread.sleep(2);
                }
                p.flush();
            } catch (Throwable t) {
                crash.compareAndSet(null, t);
            }
        }, "leader-kill-producer");
        Thread consumer = new Thread(() -> {
            try (KafkaConsumer<String, String> c = kit.consumer("group.id", topic + "-g")) {
                c.subscribe(List.of(topic));
                while (!stop.get()) {
                    consumed.addAndGet(c.poll(Kit.POLL).count());
                    try {
                        c.commitSync();
                    } catch (RuntimeException e) {
                        // A commit may fail while the leader moves; the next poll retries.
                    }
                }
            } catch (Throwable t) {
                crash.compareAndSet(null, t);
            }
        }, "leader-kill-consumer");
        producer.start();
        consumer.start();
        Thread.sleep(FLOW.toMillis());
        int ackedBefore = acked.size();
        long killStart = System.nanoTime();
        compat.killLeader();
        long killMs = (System.nanoTime() - killStart) / 1_000_000;
        int ackedAtReturn = acked.size();
        Thread.sleep(FLOW.toMillis());
        stop.set(true);
        producer.join(60_000);
        consumer.join(30_000);
        check(crash.get() == null, "client thread died: " + (crash.get() == null ? "" : Compat.describe(crash.get())));
        check(acked.size() > ackedAtReturn, "no record acknowledged after the kill (" + acked.size() + " in all)");
        Set<String> read = new HashSet<>(Kit.values(kit.readAll(topic, 3, "read_uncommitted", Duration.ofSeconds(30))));
        Set<String> lost = new HashSet<>(acked);
        lost.removeAll(read);
        check(lost.isEmpty(), lost.size() + " acknowledged records lost, e.g. " + (lost.isEmpty() ? "" : lost.iterator().next()));
        return acked.size() + " acked (" + ackedBefore + " before the kill), " + failed.get() + " failed, none lost; "
                + "the group consumed " + consumed.get() + " while running; kill+restart took " + killMs + " ms";
    }

    String unknownTopic() throws Exception {
        String topic = compat.prefix + "-missing";
        try (KafkaProducer<String, String> p = kit.producer("max.block.ms", "5000")) {
            try {
                p.send(new ProducerRecord<>(topic, "k", "v")).get();
            } catch (Exception e) {
                // Against Kafka: the metadata wait times out ("not present in metadata"), or the
                // error itself surfaces.
                boolean unknown = Kit.causedBy(e, UnknownTopicOrPartitionException.class);
                boolean metadataTimeout = Kit.causedBy(e, TimeoutException.class)
                        && String.valueOf(Compat.describe(e)).contains("not present in metadata");
                check(unknown || metadataTimeout, "unexpected error: " + Compat.describe(e));
                try (KafkaConsumer<String, String> c = kit.consumer()) {
                    check(!c.listTopics().containsKey(topic), "the topic was created by the produce");
                }
                return Compat.describe(e) + "; the topic was not created";
            }
        }
        throw new AssertionError("produce to a missing topic succeeded");
    }

    String offsetOutOfRange() throws Exception {
        String topic = compat.prefix + "-range";
        kit.createTopic(topic, 1);
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaProducer<String, String> p = kit.producer()) {
            Kit.sendAll(p, topic, Kit.numbered("o", 5));
        }
        try (KafkaConsumer<String, String> c = kit.consumer("auto.offset.reset", "none")) {
            c.assign(List.of(tp));
            c.seek(tp, 100);
            long deadline = System.nanoTime() + 20_000_000_000L;
            while (System.nanoTime() < deadline) {
                try {
                    for (ConsumerRecord<String, String> r : c.poll(Kit.POLL)) {
                        throw new AssertionError("read " + r + " from past the end");
                    }
                } catch (OffsetOutOfRangeException e) {
                    check(e.offsetOutOfRangePartitions().getOrDefault(tp, -1L) == 100,
                            "out-of-range partitions " + e.offsetOutOfRangePartitions());
                    return "poll threw OffsetOutOfRangeException for offset 100 (reset policy none)";
                }
            }
        }
        throw new AssertionError("no OffsetOutOfRangeException within 20 s of seeking to 100 (end 5)");
    }
}

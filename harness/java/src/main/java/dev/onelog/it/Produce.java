// Produces records whose key and value are the decimal ids --from .. --from+--count-1 to
// --topic (to --partition when given, else by key), waits for every acknowledgement, and prints
// {"acked":N,"per_partition":{"p":n,...}}. Exits 1 if any send failed.
//
// --rate=N paces the sends to N records per second, so that a test's faults fall while records
// are still being written (unpaced, 100,000 records may all be written before the first fault).
//
// Defaults are the Java client's own (idempotence on, acks=all); client configs on the command
// line override them.
package dev.onelog.it;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

public final class Produce {
    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        String topic = args.string("topic");
        long from = args.number("from", 0);
        long count = args.number("count");
        Integer partition = args.string("partition", null) == null ? null : (int) args.number("partition");
        long rate = args.number("rate", 0);
        Map<String, Object> defaults = Map.of(
            "key.serializer", StringSerializer.class.getName(),
            "value.serializer", StringSerializer.class.getName(),
            "linger.ms", "5");
        Map<Integer, Long> perPartition = new TreeMap<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(args.clientConfig(defaults))) {
            List<Future<RecordMetadata>> pending = new ArrayList<>();
            long started = System.nanoTime();
            for (long id = from; id < from + count; id++) {
                if (rate > 0) {
                    pace(started, (id - from) * 1_000_000_000L / rate);
                }
                String text = Long.toString(id);
                pending.add(producer.send(new ProducerRecord<>(topic, partition, text, text)));
            }
            for (Future<RecordMetadata> f : pending) {
                perPartition.merge(f.get().partition(), 1L, Long::sum);
            }
        }
        long acked = perPartition.values().stream().mapToLong(Long::longValue).sum();
        Json.println(Json.obj("acked", acked, "per_partition", perPartition));
        System.exit(acked == count ? 0 : 1);
    }

    /** Sleeps until `dueNanos` after `started` when the sends are at least 1 ms ahead of it. */
    private static void pace(long started, long dueNanos) throws InterruptedException {
        long ahead = dueNanos - (System.nanoTime() - started);
        if (ahead >= 1_000_000L) {
            Thread.sleep(ahead / 1_000_000L);
        }
    }
}

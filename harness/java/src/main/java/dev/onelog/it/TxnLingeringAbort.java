// A transaction aborted while its first batch still lingers in the client, right after a
// committed one: the partition is added (AddPartitionsToTxn goes out at once), nothing is
// written. Kafka answers the abort with success; a transactions-v1 broker that took it for a
// confused retry of the commit answered INVALID_TXN_STATE, which is fatal to the producer.
//
// One producer (--transactional-id, linger.ms 20 s) on --topic: "committed-1" sent and acked,
// committed; "aborted-lingering" sent without waiting, a second's pause, abortTransaction();
// "committed-2" sent, committed (the commit flushes the linger). Then a read_committed
// consumer reads --topic's partition 0 to its end.
//
// Prints one JSON line: {"aborted":"ok","read_committed":["committed-1","committed-2"]}.
// Any failure (the abort or a commit that throws) exits non-zero with the stack trace.
package dev.onelog.it;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class TxnLingeringAbort {
    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        String topic = args.string("topic");
        Map<String, Object> producerDefaults = Map.of(
            "transactional.id", args.string("transactional-id"),
            "linger.ms", "20000",
            "key.serializer", StringSerializer.class.getName(),
            "value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(args.clientConfig(producerDefaults))) {
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, "a", "committed-1"));
            producer.commitTransaction();

            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, "b", "aborted-lingering"));
            Thread.sleep(1_000);
            producer.abortTransaction();

            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, 0, "c", "committed-2"));
            producer.commitTransaction();
        }
        Json.println(Json.obj("aborted", "ok", "read_committed", readCommitted(args, topic)));
    }

    /** Every value of partition 0 under read_committed, up to its last stable offset. */
    private static List<String> readCommitted(Args args, String topic) {
        Map<String, Object> defaults = Map.of(
            "key.deserializer", StringDeserializer.class.getName(),
            "value.deserializer", StringDeserializer.class.getName(),
            "enable.auto.commit", "false",
            "isolation.level", "read_committed");
        TopicPartition partition = new TopicPartition(topic, 0);
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(args.clientConfig(defaults))) {
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            long end = consumer.endOffsets(List.of(partition)).get(partition);
            long deadline = System.currentTimeMillis() + 60_000;
            while (consumer.position(partition) < end) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("reader stuck at " + consumer.position(partition) + " of " + end);
                }
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(100))) {
                    values.add(record.value());
                }
            }
        }
        return values;
    }
}

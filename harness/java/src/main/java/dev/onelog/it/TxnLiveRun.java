// The "13 physical, 10 logical" live run of the EOS article (shared/seeds/kafka-eos-live-run-ru)
// with the Java client: one transactional producer (--transactional-id) on --topic sends
// batch A (5 records) and commits; batch B fails after three records and is aborted; batch B
// is sent again (5) and committed. Every send waits for its acknowledgement (send().get()):
// abortTransaction() drops records still buffered in the client, and the scenario needs the
// three aborted ones on the broker's disk.
//
// Then two consumers read every partition of --topic from the beginning up to its end offset
// (assign, seekToBeginning, poll until position >= endOffsets; under read_committed the end
// offset is the last stable offset): read_committed must see the 10 committed values, in
// order, read_uncommitted all 13.
//
// Prints one JSON line:
//   {"sent":[{"value":..,"partition":p,"offset":o},..],"physical":13,"logical":10,
//    "read_committed":{"values":[..],"end_offsets":{"p":o},"positions":{"p":o}},
//    "read_uncommitted":{...}}
// Any failure (a send, commit or abort that throws, a reader that does not reach the end
// within --timeout-ms) exits non-zero with the stack trace on stderr.
package dev.onelog.it;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class TxnLiveRun {
    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        String topic = args.string("topic");
        long timeoutMs = args.number("timeout-ms", 60_000);
        Map<String, Object> producerDefaults = Map.of(
            "transactional.id", args.string("transactional-id"),
            "key.serializer", StringSerializer.class.getName(),
            "value.serializer", StringSerializer.class.getName());
        List<Object> sent = new ArrayList<>();
        long logical = 0;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(args.clientConfig(producerDefaults))) {
            producer.initTransactions();

            producer.beginTransaction();
            sendSync(producer, topic, "A", "batchA-", 5, sent);
            producer.commitTransaction();
            logical += 5;

            producer.beginTransaction();
            // The simulated processing failure on the third record of batch B.
            sendSync(producer, topic, "B", "batchB-try1-", 3, sent);
            producer.abortTransaction();

            producer.beginTransaction();
            sendSync(producer, topic, "B", "batchB-", 5, sent);
            producer.commitTransaction();
            logical += 5;
        }
        Map<String, Object> committed = readAll(args, topic, "read_committed", timeoutMs);
        Map<String, Object> uncommitted = readAll(args, topic, "read_uncommitted", timeoutMs);
        Json.println(Json.obj(
            "sent", sent,
            "physical", sent.size(),
            "logical", logical,
            "read_committed", committed,
            "read_uncommitted", uncommitted));
    }

    /** `count` records keyed prefix+i, valued valuePrefix+i, each acknowledged before the next. */
    private static void sendSync(KafkaProducer<String, String> producer, String topic, String keyPrefix,
                                 String valuePrefix, int count, List<Object> sent) throws Exception {
        for (int i = 0; i < count; i++) {
            String value = valuePrefix + i;
            RecordMetadata md = producer.send(new ProducerRecord<>(topic, keyPrefix + i, value)).get();
            sent.add(Json.obj("value", value, "partition", md.partition(), "offset", md.offset()));
        }
    }

    /** Every value of every partition of `topic` under `isolation`, from the beginning to the end offsets. */
    private static Map<String, Object> readAll(Args args, String topic, String isolation, long timeoutMs) {
        Map<String, Object> defaults = Map.of(
            "key.deserializer", StringDeserializer.class.getName(),
            "value.deserializer", StringDeserializer.class.getName(),
            "enable.auto.commit", "false",
            "isolation.level", isolation);
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(args.clientConfig(defaults))) {
            List<TopicPartition> partitions = new ArrayList<>();
            for (PartitionInfo info : consumer.partitionsFor(topic)) {
                partitions.add(new TopicPartition(topic, info.partition()));
            }
            consumer.assign(partitions);
            consumer.seekToBeginning(partitions);
            Map<TopicPartition, Long> ends = consumer.endOffsets(partitions);
            List<String> values = new ArrayList<>();
            long deadline = System.currentTimeMillis() + timeoutMs;
            while (!reachedEnds(consumer, ends)) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException(isolation + " reader stuck: positions "
                        + positions(consumer, partitions) + ", end offsets " + ends + ", read " + values);
                }
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(100))) {
                    values.add(record.value());
                }
            }
            return Json.obj(
                "values", values,
                "end_offsets", byPartition(ends),
                "positions", positions(consumer, partitions));
        }
    }

    private static boolean reachedEnds(KafkaConsumer<String, String> consumer, Map<TopicPartition, Long> ends) {
        return ends.entrySet().stream().allMatch(e -> consumer.position(e.getKey()) >= e.getValue());
    }

    private static Map<Integer, Long> positions(KafkaConsumer<String, String> consumer, List<TopicPartition> partitions) {
        Map<Integer, Long> positions = new TreeMap<>();
        for (TopicPartition tp : partitions) {
            positions.put(tp.partition(), consumer.position(tp));
        }
        return positions;
    }

    private static Map<Integer, Long> byPartition(Map<TopicPartition, Long> offsets) {
        Map<Integer, Long> out = new TreeMap<>();
        offsets.forEach((tp, o) -> out.put(tp.partition(), o));
        return out;
    }
}

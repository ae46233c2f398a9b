// The read-process-write loop of both streaming benches. The source topic (topic1) is filled
// first; each worker then reads its own slice of it in batches (KafkaConsumer.poll, not
// measured) and, for each record, forwards its value to topic2 and commits the next offset of
// topic1 for its consumer group. Only that write path is measured:
//   without a transactional id  send, KafkaConsumer.commitSync, wait for the send future;
//   with one                    beginTransaction, send, sendOffsetsToTransaction,
//                               commitTransaction, wait for the send future.
package dev.onelog.bench;

import java.time.Duration;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;

final class Streaming implements Runner.Worker {
    static final TopicPartition SOURCE = new TopicPartition(Clients.TOPIC1, 0);
    private static final Duration POLL_TIMEOUT = Duration.ofMillis(100);

    private final KafkaConsumer<byte[], byte[]> consumer;
    private final KafkaProducer<byte[], byte[]> producer;
    private final boolean transactional;
    private final ConsumerGroupMetadata groupMetadata;
    private Iterator<ConsumerRecord<byte[], byte[]>> batch = Collections.emptyIterator();

    /** A worker reading the source from `fromOffset`; `transactionalId` may be null. */
    Streaming(BenchConfig cfg, String group, String transactionalId, long fromOffset) {
        consumer = Clients.consumer(cfg, group);
        consumer.assign(List.of(SOURCE));
        consumer.seek(SOURCE, fromOffset);
        groupMetadata = consumer.groupMetadata();
        producer = Clients.producer(cfg, transactionalId);
        transactional = transactionalId != null;
        if (transactional) {
            producer.initTransactions();
        }
    }

    /**
     * Appends `count` records to the source (non-transactionally, acks=all) and returns the
     * offset of the first; worker i of a concurrent run starts at first + i * iterations.
     */
    static long fillSource(BenchConfig cfg, long count) throws Exception {
        long first;
        try (KafkaConsumer<byte[], byte[]> probe = Clients.consumer(cfg, null)) {
            first = probe.endOffsets(List.of(SOURCE)).get(SOURCE);
        }
        byte[] fixed = Clients.fixedPayload(cfg);
        AtomicReference<Exception> failure = new AtomicReference<>();
        try (KafkaProducer<byte[], byte[]> producer = Clients.producer(cfg, null)) {
            for (long i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(SOURCE.topic(), SOURCE.partition(), null, Clients.value(fixed, i)),
                    (metadata, e) -> {
                        if (e != null) {
                            failure.compareAndSet(null, e);
                        }
                    });
            }
            producer.flush();
        }
        if (failure.get() != null) {
            throw new IllegalStateException("filling " + SOURCE + " failed", failure.get());
        }
        return first;
    }

    @Override
    public long iteration(int i) throws Exception {
        ConsumerRecord<byte[], byte[]> record = next();
        Map<TopicPartition, OffsetAndMetadata> offsets = Map.of(SOURCE, new OffsetAndMetadata(record.offset() + 1));
        long start = System.nanoTime();
        if (transactional) {
            producer.beginTransaction();
        }
        Future<RecordMetadata> sent = producer.send(new ProducerRecord<>(Clients.TOPIC2, record.value()));
        if (transactional) {
            producer.sendOffsetsToTransaction(offsets, groupMetadata);
            producer.commitTransaction();
        } else {
            consumer.commitSync(offsets);
        }
        sent.get();
        return System.nanoTime() - start;
    }

    private ConsumerRecord<byte[], byte[]> next() {
        while (!batch.hasNext()) {
            batch = consumer.poll(POLL_TIMEOUT).iterator();
        }
        return batch.next();
    }

    @Override
    public void close() {
        producer.close();
        consumer.close();
    }
}

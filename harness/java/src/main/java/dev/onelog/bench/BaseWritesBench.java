// Multi-partition write without a transaction: each iteration sends one record to topic1 and
// one to topic2 asynchronously (KafkaProducer.send), then waits for both futures. The recorded
// latency is the whole iteration. Settings: BenchConfig.
package dev.onelog.bench;

import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;

public final class BaseWritesBench {
    public static void main(String[] argv) throws Exception {
        BenchConfig cfg = new BenchConfig("tx-writes-bench", "streaming-bench");
        Runner.run("BaseWritesBench", cfg, index -> new Writes(cfg, null));
    }

    /** The write loop of both writes benches: with a transactional id, each iteration is a transaction. */
    static final class Writes implements Runner.Worker {
        private final KafkaProducer<byte[], byte[]> producer;
        private final byte[] fixed;
        private final boolean transactional;

        Writes(BenchConfig cfg, String transactionalId) {
            producer = Clients.producer(cfg, transactionalId);
            fixed = Clients.fixedPayload(cfg);
            transactional = transactionalId != null;
            if (transactional) {
                producer.initTransactions();
            }
        }

        @Override
        public long iteration(int i) throws Exception {
            byte[] value = Clients.value(fixed, i);
            long start = System.nanoTime();
            if (transactional) {
                producer.beginTransaction();
            }
            Future<RecordMetadata> f1 = producer.send(new ProducerRecord<>(Clients.TOPIC1, value));
            Future<RecordMetadata> f2 = producer.send(new ProducerRecord<>(Clients.TOPIC2, value));
            if (transactional) {
                producer.commitTransaction();
            }
            f1.get();
            f2.get();
            return System.nanoTime() - start;
        }

        @Override
        public void close() {
            producer.close();
        }
    }
}

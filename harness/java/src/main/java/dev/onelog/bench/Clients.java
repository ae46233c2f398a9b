// Client configurations and record values shared by the four benches.
package dev.onelog.bench;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Properties;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

final class Clients {
    static final String TOPIC1 = "topic1";
    static final String TOPIC2 = "topic2";
    /** Room for the batch and request headers around one record of PAYLOAD_BYTES. */
    private static final int REQUEST_OVERHEAD_BYTES = 64 * 1024;
    private static final int REQUEST_SIZE_DEFAULT_BYTES = 1024 * 1024;

    private Clients() {}

    /**
     * acks=all and linger.ms=0 (the 2.x default that 4.x raised to 5 ms, which would add the
     * linger to every non-transactional send); idempotence is left at the client's default.
     * `transactionalId` may be null.
     */
    static KafkaProducer<byte[], byte[]> producer(BenchConfig cfg, String transactionalId) {
        Properties props = new Properties();
        props.setProperty("acks", "all");
        props.setProperty("linger.ms", "0");
        props.setProperty("key.serializer", ByteArraySerializer.class.getName());
        props.setProperty("value.serializer", ByteArraySerializer.class.getName());
        int requestBytes = Math.max(REQUEST_SIZE_DEFAULT_BYTES, cfg.payloadBytes + REQUEST_OVERHEAD_BYTES);
        props.setProperty("max.request.size", Integer.toString(requestBytes));
        if (transactionalId != null) {
            props.setProperty("transactional.id", transactionalId);
        }
        return new KafkaProducer<>(cfg.clientConfig(props));
    }

    /** A consumer of `group` that never commits by itself; `group` may be null. */
    static KafkaConsumer<byte[], byte[]> consumer(BenchConfig cfg, String group) {
        Properties props = new Properties();
        if (group != null) {
            props.setProperty("group.id", group);
        }
        props.setProperty("enable.auto.commit", "false");
        props.setProperty("auto.offset.reset", "earliest");
        props.setProperty("key.deserializer", ByteArrayDeserializer.class.getName());
        props.setProperty("value.deserializer", ByteArrayDeserializer.class.getName());
        return new KafkaConsumer<>(cfg.clientConfig(props));
    }

    /** The fixed value of PAYLOAD_BYTES bytes, or null when values are textual. */
    static byte[] fixedPayload(BenchConfig cfg) {
        if (cfg.payloadBytes < 0) {
            return null;
        }
        byte[] value = new byte[cfg.payloadBytes];
        Arrays.fill(value, (byte) 'x');
        return value;
    }

    /** Iteration `i`'s value: the fixed payload, else `i` as text. */
    static byte[] value(byte[] fixed, long i) {
        return fixed != null ? fixed : Long.toString(i).getBytes(StandardCharsets.UTF_8);
    }
}

// Scenarios of the compatibility matrix about producer ids and transactions: idempotent produce,
// commit/abort read at both isolation levels, consume-process-produce with the offsets in the
// transaction, and fencing by a second producer with the same transactional.id. kafka-clients
// 4.x negotiates transactions v2 from ApiVersions, 3.x and 2.x use v1.
package dev.onelog.compat.clients;

import static dev.onelog.compat.Compat.check;

import dev.onelog.compat.Compat;
import dev.onelog.compat.Kit;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;

final class Txns {
    private static final Duration READ_TIMEOUT = Duration.ofSeconds(30);
    private final Compat compat;
    private final Kit kit;

    Txns(Compat compat, Kit kit) {
        this.compat = compat;
        this.kit = kit;
    }

    private KafkaProducer<String, String> transactional(String id) {
        KafkaProducer<String, String> p = kit.producer("transactional.id", id, "transaction.timeout.ms", "30000");
        p.initTransactions();
        return p;
    }

    String idempotentProduce() throws Exception {
        String topic = compat.prefix + "-idempotent";
        kit.createTopic(topic, 1);
        List<String> values = Kit.numbered("i", 500);
        try (KafkaProducer<String, String> p = kit.producer("enable.idempotence", "true",
                "max.in.flight.requests.per.connection", "5", "batch.size", "512")) {
            Kit.sendAll(p, topic, values);
        }
        List<ConsumerRecord<String, String>> got = kit.readAll(topic, 1, "read_uncommitted", READ_TIMEOUT);
        check(Kit.values(got).equals(values), "read " + got.size() + " records, not the 500 in order");
        for (int i = 0; i < got.size(); i++) check(got.get(i).offset() == i, "record " + i + " at offset " + got.get(i).offset());
        return "500 records in small batches, 5 in flight: exactly once, in order, offsets 0..499";
    }

    String commitAbort() throws Exception {
        String topic = compat.prefix + "-txn";
        kit.createTopic(topic, 1);
        try (KafkaProducer<String, String> p = transactional(topic + "-tx")) {
            for (String[] round : new String[][] {{"c1-", "5", "commit"}, {"a-", "3", "abort"}, {"c2-", "5", "commit"}}) {
                p.beginTransaction();
                for (String v : Kit.numbered(round[0], Integer.parseInt(round[1]))) p.send(new ProducerRecord<>(topic, v, v));
                p.flush();
                if (round[2].equals("commit")) p.commitTransaction();
                else p.abortTransaction();
            }
        }
        List<String> committed = new ArrayList<>(Kit.numbered("c1-", 5));
        committed.addAll(Kit.numbered("c2-", 5));
        List<String> all = new ArrayList<>(Kit.numbered("c1-", 5));
        all.addAll(Kit.numbered("a-", 3));
        all.addAll(Kit.numbered("c2-", 5));
        List<String> rc = Kit.values(kit.readAll(topic, 1, "read_committed", READ_TIMEOUT));
        List<String> ru = Kit.values(kit.readAll(topic, 1, "read_uncommitted", READ_TIMEOUT));
        check(rc.equals(committed), "read_committed read " + rc);
        check(ru.equals(all), "read_uncommitted read " + ru);
        return "read_committed 10, read_uncommitted 13, in order";
    }

    String consumeProcessProduce() throws Exception {
        String in = compat.prefix + "-cpp-in";
        String out = compat.prefix + "-cpp-out";
        String group = in + "-g";
        kit.createTopic(in, 3);
        kit.createTopic(out, 3);
        List<String> inputs = Kit.numbered("w", 40);
        try (KafkaProducer<String, String> p = kit.producer()) {
            Kit.sendAll(p, in, inputs);
        }
        int processed = 0;
        int transactions = 0;
        try (KafkaConsumer<String, String> c = kit.consumer("group.id", group, "isolation.level", "read_committed",
                        "max.poll.records", "7");
                KafkaProducer<String, String> p = transactional(out + "-tx")) {
            c.subscribe(List.of(in));
            long deadline = System.nanoTime() + READ_TIMEOUT.toNanos();
            while (processed < inputs.size()) {
                check(System.nanoTime() < deadline, "processed " + processed + " of " + inputs.size());
                ConsumerRecords<String, String> batch = c.poll(Kit.POLL);
                if (batch.isEmpty()) continue;
                p.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<String, String> r : batch) {
                    p.send(new ProducerRecord<>(out, r.key(), r.value().toUpperCase()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    processed++;
                }
                p.sendOffsetsToTransaction(offsets, c.groupMetadata());
                p.commitTransaction();
                transactions++;
            }
        }
        List<String> expected = new ArrayList<>();
        for (String v : inputs) expected.add(v.toUpperCase());
        List<String> got = Kit.values(kit.readAll(out, 3, "read_committed", READ_TIMEOUT));
        check(got.size() == expected.size() && new java.util.HashSet<>(got).equals(new java.util.HashSet<>(expected)),
                "output " + got);
        try (Admin admin = kit.admin(); KafkaConsumer<String, String> c = kit.consumer()) {
            Map<TopicPartition, OffsetAndMetadata> committed =
                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            Map<TopicPartition, Long> end = c.endOffsets(Kit.partitions(in, 3));
            for (Map.Entry<TopicPartition, Long> e : end.entrySet()) {
                OffsetAndMetadata o = committed.get(e.getKey());
                check(o != null && o.offset() == e.getValue(), "committed " + o + " for " + e.getKey() + ", end " + e.getValue());
            }
        }
        return "40 records in " + transactions + " transactions: output exact, committed offsets at the input's end";
    }

    /** A fencing error as kafka-clients surfaces it against Kafka (maybe wrapped). */
    private static boolean fenced(Throwable t) {
        return Kit.causedBy(t, ProducerFencedException.class, InvalidProducerEpochException.class);
    }

    String fencing() throws Exception {
        String topic = compat.prefix + "-fence";
        kit.createTopic(topic, 1);
        String id = topic + "-tx";
        String error;
        try (KafkaProducer<String, String> first = transactional(id)) {
            first.beginTransaction();
            first.send(new ProducerRecord<>(topic, "k", "from-first")).get();
            try (KafkaProducer<String, String> second = transactional(id)) {
                try {
                    first.send(new ProducerRecord<>(topic, "k", "from-first-after")).get();
                    first.commitTransaction();
                    throw new AssertionError("the first producer committed after being fenced");
                } catch (Exception e) {
                    check(fenced(e), "the first producer failed without a fencing error: " + Compat.describe(e));
                    error = Compat.describe(e);
                }
                second.beginTransaction();
                second.send(new ProducerRecord<>(topic, "k", "from-second"));
                second.commitTransaction();
            }
        }
        List<String> rc = Kit.values(kit.readAll(topic, 1, "read_committed", READ_TIMEOUT));
        check(rc.equals(List.of("from-second")), "read_committed read " + rc);
        return "first producer: " + error + "; only the second's transaction is visible";
    }

    String fencedProducer() throws Exception {
        String topic = compat.prefix + "-fenced";
        kit.createTopic(topic, 1);
        String id = topic + "-tx";
        try (KafkaProducer<String, String> first = transactional(id); KafkaProducer<String, String> second = transactional(id)) {
            // `first` is fenced before it does anything: its first transaction must fail ...
            String error;
            try {
                first.beginTransaction();
                first.send(new ProducerRecord<>(topic, "k", "zombie")).get();
                first.commitTransaction();
                throw new AssertionError("a fenced producer committed");
            } catch (Exception e) {
                check(fenced(e), "the fenced producer failed without a fencing error: " + Compat.describe(e));
                error = Compat.describe(e);
            }
            // ... and it cannot continue: the next transaction fails too.
            try {
                first.beginTransaction();
                first.send(new ProducerRecord<>(topic, "k", "zombie-2")).get();
                first.commitTransaction();
                throw new AssertionError("a fenced producer committed a second time");
            } catch (AssertionError e) {
                throw e;
            } catch (Exception e) {
                error += "; then " + e.getClass().getSimpleName();
            }
            second.beginTransaction();
            second.send(new ProducerRecord<>(topic, "k", "live"));
            second.commitTransaction();
            List<String> rc = Kit.values(kit.readAll(topic, 1, "read_committed", READ_TIMEOUT));
            check(rc.equals(List.of("live")), "read_committed read " + rc);
            return error;
        }
    }
}

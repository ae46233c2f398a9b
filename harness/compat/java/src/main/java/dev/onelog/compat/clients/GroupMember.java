// One group member driven by another process: the Java half of the mixed_group scenario (a
// Java member and a librdkafka member in one KIP-848 group, run by the confluent-kafka driver,
// harness/compat/python/confluent_driver.py). Usage: GroupMember <client id> <topic> <group>,
// environment as in dev.onelog.compat.Compat (run.sh sets COMPAT_GROUP_PROTOCOL=consumer for
// java-4.4.0-member). It subscribes to the topic, polls, commits after every poll (so a partition
// handed over carries its offsets), and prints to stdout, one line each:
//   assigned P,P,...     its assignment whenever it changes (sorted partition numbers)
//   record P OFFSET V    every record it reads
//   closed               after `leave` (or the end of stdin): the consumer closed, leaving the group
//   error TEXT           a failure; the process then exits 1
// Logs go to stderr.
package dev.onelog.compat.clients;

import dev.onelog.compat.Compat;
import dev.onelog.compat.Kit;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;

public final class GroupMember {
    private GroupMember() {}

    public static void main(String[] args) {
        PrintStream out = System.out;
        if (args.length < 3) {
            out.println("error usage: GroupMember <client id> <topic> <group>");
            System.exit(2);
        }
        String topic = args[1];
        String group = args[2];
        Kit kit = new Kit(new Compat(args[0], Compat.kafkaVersion()).bootstrap);
        AtomicBoolean leave = new AtomicBoolean();
        Thread stdin = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                for (String l; (l = r.readLine()) != null; ) {
                    if (l.trim().equals("leave")) break;
                }
            } catch (Exception e) {
                System.err.println("GroupMember stdin: " + e);
            }
            leave.set(true);
        }, "group-member-stdin");
        stdin.setDaemon(true);
        stdin.start();
        try (KafkaConsumer<String, String> c = kit.consumer("group.id", group, "max.poll.records", "5")) {
            c.subscribe(List.of(topic));
            String shown = null;
            while (!leave.get()) {
                for (ConsumerRecord<String, String> r : c.poll(Kit.POLL)) {
                    out.println("record " + r.partition() + " " + r.offset() + " " + r.value());
                }
                c.commitSync();
                TreeSet<Integer> parts = new TreeSet<>();
                for (TopicPartition tp : c.assignment()) parts.add(tp.partition());
                String now = "assigned " + String.join(",", parts.stream().map(String::valueOf).toList());
                if (!now.equals(shown)) {
                    out.println(now);
                    shown = now;
                }
                out.flush();
            }
        } catch (Throwable t) {
            t.printStackTrace();
            out.println("error " + Compat.describe(t).replace('\n', ' '));
            out.flush();
            System.exit(1);
        }
        out.println("closed");
        out.flush();
        System.exit(0);
    }
}

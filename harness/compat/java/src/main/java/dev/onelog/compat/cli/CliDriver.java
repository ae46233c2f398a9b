// The Kafka command-line tools driver of the compatibility matrix (client id kafka-cli-4.4.0):
// one scenario per tool, each asserting the tool's exit code and the values in its output.
// The tools are the 4.4.0 main classes bin/kafka-*.sh start, run in this JVM by Tool.
package dev.onelog.compat.cli;

import static dev.onelog.compat.Compat.check;

import dev.onelog.compat.Compat;
import dev.onelog.compat.Kit;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

public final class CliDriver {
    static final String TOPICS = "org.apache.kafka.tools.TopicCommand";
    static final String CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer";
    static final String CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer";
    static final String GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";
    /** In kafka-tools in 4.4.0 (4.1.1 still had the Scala kafka.admin.ConfigCommand in kafka_2.13). */
    static final String CONFIGS = "org.apache.kafka.tools.ConfigCommand";
    static final String DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand";
    static final String TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand";
    static final String PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance";
    static final String CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance";
    static final String LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand";
    static final String QUORUM = "org.apache.kafka.tools.MetadataQuorumCommand";

    private final Compat compat;
    private final Kit kit;

    private CliDriver(Compat compat) {
        this.compat = compat;
        this.kit = new Kit(compat.bootstrap);
    }

    public static void main(String[] args) {
        Compat compat = new Compat(args.length > 0 ? args[0] : "kafka-cli-4.4.0", Compat.kafkaVersion());
        if ("security".equals(System.getenv("COMPAT_SUITE"))) {
            try {
                new CliSecurity(compat).runAll();
            } catch (java.io.IOException e) {
                e.printStackTrace();
            }
            System.exit(0);
        }
        CliDriver d = new CliDriver(compat);
        compat.run("kafka-topics", d::topics);
        compat.run("kafka-console-producer-consumer", d::console);
        compat.run("kafka-consumer-groups-describe", d::groupsDescribe);
        compat.run("kafka-consumer-groups-reset-offsets", d::groupsReset);
        compat.run("kafka-consumer-groups-delete", d::groupsDelete);
        compat.run("kafka-configs-describe", d::configsDescribe);
        compat.run("kafka-configs-alter", d::configsAlter);
        compat.run("kafka-delete-records", d::deleteRecords);
        compat.run("kafka-transactions", d::transactions);
        compat.run("kafka-producer-perf-test", d::producerPerf);
        compat.run("kafka-consumer-perf-test", d::consumerPerf);
        compat.run("kafka-log-dirs", d::logDirs);
        compat.run("kafka-metadata-quorum", d::metadataQuorum);
        System.exit(0);
    }

    /** Runs a tool with --bootstrap-server first and checks it exited 0. */
    private Tool.Result okWithInput(String main, String stdin, String... args) throws Exception {
        List<String> all = new ArrayList<>(List.of("--bootstrap-server", compat.bootstrap));
        all.addAll(Arrays.asList(args));
        Tool.Result r = Tool.run(main, stdin, all.toArray(new String[0]));
        check(r.code() == 0, main.substring(main.lastIndexOf('.') + 1) + " " + String.join(" ", args) + ": " + r);
        return r;
    }

    private Tool.Result ok(String main, String... args) throws Exception {
        return okWithInput(main, "", args);
    }

    private static List<String> lines(String out) {
        List<String> l = new ArrayList<>();
        for (String s : out.split("\n")) if (!s.isBlank()) l.add(s.strip());
        return l;
    }

    /** The row of a whitespace-separated table whose first columns are `lead`. */
    private static String[] row(String out, String... lead) {
        for (String line : lines(out)) {
            String[] cols = line.split("\\s+");
            if (cols.length >= lead.length && Arrays.equals(Arrays.copyOf(cols, lead.length), lead)) return cols;
        }
        throw new AssertionError("no row starting " + Arrays.toString(lead) + " in [" + out.strip() + "]");
    }

    private static final List<String> TOPICS_LIST = List.of("--list");

    /**
     * kafka-topics with `args` until it exits 0 with an output that satisfies `shows`, for at
     * most 15 s; past that, one more run, which must exit 0 and whose output the caller's check
     * then reports.
     */
    private String topicsUntil(List<String> args, java.util.function.Predicate<String> shows) throws Exception {
        List<String> all = new ArrayList<>(List.of("--bootstrap-server", compat.bootstrap));
        all.addAll(args);
        long deadline = System.nanoTime() + 15_000_000_000L;
        while (true) {
            Tool.Result r = Tool.run(TOPICS, "", all.toArray(new String[0]));
            if (r.code() == 0 && shows.test(r.out())) return r.out();
            if (System.nanoTime() > deadline) return ok(TOPICS, args.toArray(new String[0])).out();
            Thread.sleep(200);
        }
    }

    private String topic(String name) {
        return compat.prefix + "-cli-" + name;
    }

    String topics() throws Exception {
        String t = topic("topics");
        Tool.Result created = ok(TOPICS, "--create", "--topic", t, "--partitions", "3", "--replication-factor", "3",
                "--config", "segment.bytes=" + Kit.SEGMENT_BYTES);
        check(created.out().contains("Created topic " + t + "."), "create said " + created);
        // The tool may ask another node than the one that created or altered the topic: a
        // node applies a change once it has the log entry, as Kafka's brokers apply metadata
        // after the controller committed it, so each look waits (bounded) for it to show.
        check(lines(topicsUntil(TOPICS_LIST, out -> lines(out).contains(t))).contains(t), "--list does not name " + t);
        String described = topicsUntil(List.of("--describe", "--topic", t), out -> out.contains("PartitionCount: 3"));
        check(described.contains("PartitionCount: 3") && described.contains("ReplicationFactor: 3"), "describe said " + described);
        check(described.contains("segment.bytes=" + Kit.SEGMENT_BYTES), "describe shows no segment.bytes: " + described);
        ok(TOPICS, "--alter", "--topic", t, "--partitions", "5");
        // Regression: CI's describe reached a node that had not applied the alteration yet.
        String altered = topicsUntil(List.of("--describe", "--topic", t), out -> out.contains("PartitionCount: 5"));
        check(altered.contains("PartitionCount: 5"), "after --alter --partitions 5 describe said " + altered);
        for (int p = 0; p < 5; p++) check(altered.contains("Partition: " + p + "\t"), "describe lacks partition " + p + ": " + altered);
        ok(TOPICS, "--delete", "--topic", t);
        long deadline = System.nanoTime() + 15_000_000_000L;
        while (lines(ok(TOPICS, "--list").out()).contains(t)) {
            check(System.nanoTime() < deadline, "--list still names " + t + " 15 s after --delete");
            Thread.sleep(300);
        }
        return "create (3 partitions, RF 3, segment.bytes), list, describe, alter to 5 partitions, delete: outputs as Kafka's";
    }

    String console() throws Exception {
        String t = topic("console");
        kit.createTopic(t, 1);
        String input = "k1:v1\nk2:v2 with spaces\nk3:v3\n";
        // 4.4 deprecates --property (a warning on stdout) for --reader-property / --formatter-property.
        okWithInput(CONSOLE_PRODUCER, input, "--topic", t, "--reader-property", "parse.key=true", "--reader-property",
                "key.separator=:");
        Tool.Result read = ok(CONSOLE_CONSUMER, "--topic", t, "--from-beginning", "--max-messages", "3", "--timeout-ms",
                "20000", "--formatter-property", "print.key=true", "--formatter-property", "key.separator=:");
        check(lines(read.out()).equals(lines(input)), "console consumer printed " + read);
        check(read.err().contains("Processed a total of 3 messages"), "console consumer stderr " + read.err());
        return "3 keyed lines through kafka-console-producer read back exactly by kafka-console-consumer";
    }

    /** A group that consumed and committed 4 of the 10 records of a one-partition topic. */
    private void groupAt4(String t, String group) throws Exception {
        kit.createTopic(t, 1, Kit.numbered("g", 10));
        try (KafkaConsumer<String, String> c = kit.consumer("group.id", group)) {
            c.subscribe(List.of(t));
            long deadline = System.nanoTime() + 30_000_000_000L;
            while (c.assignment().isEmpty()) {
                check(System.nanoTime() < deadline, "the group got no assignment");
                c.poll(Kit.POLL);
            }
            c.commitSync(Map.of(new TopicPartition(t, 0), new OffsetAndMetadata(4)));
        }
    }

    private long committed(String group, String t) throws Exception {
        try (Admin admin = kit.admin()) {
            OffsetAndMetadata o = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get()
                    .get(new TopicPartition(t, 0));
            return o == null ? -1 : o.offset();
        }
    }

    String groupsDescribe() throws Exception {
        String t = topic("groups-describe");
        String group = t + "-g";
        groupAt4(t, group);
        check(lines(ok(GROUPS, "--list").out()).contains(group), "--list does not name " + group);
        Tool.Result r = ok(GROUPS, "--describe", "--group", group);
        String[] cols = row(r.out(), group, t, "0");
        // GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...
        check(cols[3].equals("4") && cols[4].equals("10") && cols[5].equals("6"), "describe row " + Arrays.toString(cols));
        return "--list names the group; --describe: current offset 4, log end 10, lag 6";
    }

    String groupsReset() throws Exception {
        String t = topic("groups-reset");
        String group = t + "-g";
        groupAt4(t, group);
        Tool.Result dry = ok(GROUPS, "--reset-offsets", "--group", group, "--topic", t, "--to-earliest", "--dry-run");
        check(row(dry.out(), group, t, "0")[3].equals("0"), "dry run planned " + dry);
        check(committed(group, t) == 4, "--dry-run changed the committed offset to " + committed(group, t));
        Tool.Result exec = ok(GROUPS, "--reset-offsets", "--group", group, "--topic", t, "--to-earliest", "--execute");
        check(row(exec.out(), group, t, "0")[3].equals("0"), "execute printed " + exec);
        check(committed(group, t) == 0, "after --execute the committed offset is " + committed(group, t));
        String[] cols = row(ok(GROUPS, "--describe", "--group", group).out(), group, t, "0");
        check(cols[3].equals("0") && cols[5].equals("10"), "describe after reset " + Arrays.toString(cols));
        ok(GROUPS, "--reset-offsets", "--group", group, "--topic", t + ":0", "--to-offset", "7", "--execute");
        check(committed(group, t) == 7, "after --to-offset 7 the committed offset is " + committed(group, t));
        return "--to-earliest --dry-run planned 0 and kept 4; --execute committed 0 (describe: lag 10); --to-offset 7 committed 7";
    }

    String groupsDelete() throws Exception {
        String t = topic("groups-delete");
        String group = t + "-g";
        groupAt4(t, group);
        Tool.Result r = ok(GROUPS, "--delete", "--group", group);
        check(r.out().contains("Deletion of requested consumer groups ('" + group + "') was successful."), "delete said " + r);
        check(!lines(ok(GROUPS, "--list").out()).contains(group), "--list still names " + group);
        check(committed(group, t) == -1, "the deleted group still has offset " + committed(group, t));
        return "--delete succeeded; the group is gone from --list with its offsets";
    }

    String configsDescribe() throws Exception {
        String t = topic("configs-describe");
        kit.createTopic(t, 1);
        Tool.Result r = ok(CONFIGS, "--entity-type", "topics", "--entity-name", t, "--describe");
        check(r.out().contains("Dynamic configs for topic " + t + " are:"), "describe said " + r);
        check(r.out().contains("segment.bytes=" + Kit.SEGMENT_BYTES), "describe lacks segment.bytes: " + r);
        Tool.Result all = ok(CONFIGS, "--entity-type", "topics", "--entity-name", t, "--describe", "--all");
        check(all.out().contains("cleanup.policy=delete") && all.out().contains("retention.ms="), "--all lacks defaults: " + all);
        Tool.Result broker = ok(CONFIGS, "--entity-type", "brokers", "--entity-name", "1", "--describe", "--all");
        check(broker.out().contains("All configs for broker 1 are:") && broker.out().contains("log.segment.bytes="),
                "broker describe said " + broker);
        return "topic dynamic configs (segment.bytes), topic --all with defaults, broker 1 --all";
    }

    String configsAlter() throws Exception {
        String t = topic("configs-alter");
        kit.createTopic(t, 1);
        Tool.Result r = ok(CONFIGS, "--entity-type", "topics", "--entity-name", t, "--alter", "--add-config",
                "retention.ms=7654321,max.message.bytes=200000");
        check(r.out().contains("Completed updating config for topic " + t + "."), "alter said " + r);
        String d = ok(CONFIGS, "--entity-type", "topics", "--entity-name", t, "--describe").out();
        check(d.contains("retention.ms=7654321") && d.contains("max.message.bytes=200000"), "describe after alter " + d);
        ok(CONFIGS, "--entity-type", "topics", "--entity-name", t, "--alter", "--delete-config", "retention.ms");
        String after = ok(CONFIGS, "--entity-type", "topics", "--entity-name", t, "--describe").out();
        check(!after.contains("retention.ms=7654321") && after.contains("max.message.bytes=200000"),
                "describe after --delete-config " + after);
        return "--add-config retention.ms,max.message.bytes read back; --delete-config retention.ms removed only it";
    }

    String deleteRecords() throws Exception {
        String t = topic("delete-records");
        kit.createTopic(t, 1, Kit.numbered("d", 10));
        Path json = Files.createTempFile("onelog-compat-delete-records-", ".json");
        try {
            Files.writeString(json, "{\"partitions\":[{\"topic\":\"" + t + "\",\"partition\":0,\"offset\":4}],\"version\":1}");
            Tool.Result r = ok(DELETE_RECORDS, "--offset-json-file", json.toString());
            check(Pattern.compile("partition: " + Pattern.quote(t) + "-0\\s+low_watermark: 4").matcher(r.out()).find(),
                    "delete-records said " + r);
        } finally {
            Files.deleteIfExists(json);
        }
        try (KafkaConsumer<String, String> c = kit.consumer()) {
            long start = c.beginningOffsets(List.of(new TopicPartition(t, 0))).get(new TopicPartition(t, 0));
            check(start == 4, "beginning offset after delete-records " + start);
        }
        return "low_watermark: 4 printed; the beginning offset is 4";
    }

    String transactions() throws Exception {
        String t = topic("transactions");
        kit.createTopic(t, 1);
        String done = t + "-done";
        String open = t + "-open";
        try (KafkaProducer<String, String> committer = kit.producer("transactional.id", done);
                KafkaProducer<String, String> opener = kit.producer("transactional.id", open)) {
            committer.initTransactions();
            committer.beginTransaction();
            committer.send(new ProducerRecord<>(t, "k", "committed")).get();
            committer.commitTransaction();
            opener.initTransactions();
            opener.beginTransaction();
            opener.send(new ProducerRecord<>(t, "k", "open")).get();
            Tool.Result list = ok(TRANSACTIONS, "list");
            // TransactionalId Coordinator ProducerId TransactionState
            String[] d = row(list.out(), done);
            String[] o = row(list.out(), open);
            check(d[d.length - 1].equals("CompleteCommit") && o[o.length - 1].equals("Ongoing"), "list said " + list);
            Tool.Result desc = ok(TRANSACTIONS, "describe", "--transactional-id", open);
            check(desc.out().contains("Ongoing") && desc.out().contains(t + "-0"), "describe said " + desc);
            opener.abortTransaction();
        }
        Tool.Result after = ok(TRANSACTIONS, "describe", "--transactional-id", open);
        check(after.out().contains("CompleteAbort"), "describe after abort said " + after);
        return "list: CompleteCommit and Ongoing; describe: Ongoing with " + t + "-0, then CompleteAbort";
    }

    String producerPerf() throws Exception {
        String t = topic("producer-perf");
        kit.createTopic(t, 3);
        Tool.Result r = Tool.run(PRODUCER_PERF, "", "--topic", t, "--num-records", "10000", "--record-size", "100",
                "--throughput", "-1", "--producer-props", "bootstrap.servers=" + compat.bootstrap, "acks=all");
        check(r.code() == 0, "producer-perf-test: " + r);
        Matcher m = Pattern.compile("(\\d+) records sent, ([0-9.]+) records/sec").matcher(r.out());
        String last = null;
        while (m.find()) last = m.group(0);
        check(last != null && last.startsWith("10000 records sent"), "final line " + last + " in " + r);
        try (KafkaConsumer<String, String> c = kit.consumer()) {
            long sum = c.endOffsets(Kit.partitions(t, 3)).values().stream().mapToLong(Long::longValue).sum();
            check(sum == 10000, "the topic holds " + sum + " records");
        }
        return last + "; the topic holds 10000";
    }

    String consumerPerf() throws Exception {
        String t = topic("consumer-perf");
        kit.createTopic(t, 3);
        try (KafkaProducer<String, String> p = kit.producer("batch.size", "65536")) {
            for (int i = 0; i < 10000; i++) p.send(new ProducerRecord<>(t, "x".repeat(100)));
            p.flush();
        }
        // 4.4 deprecates --messages (a warning on stdout) for --num-records.
        Tool.Result r = ok(CONSUMER_PERF, "--topic", t, "--num-records", "10000", "--timeout", "30000", "--group", t + "-g");
        // start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, ...
        List<String> l = lines(r.out());
        check(l.size() >= 2 && l.get(0).startsWith("start.time"), "output " + r);
        String[] cols = l.get(l.size() - 1).split(",\\s*");
        check(cols.length > 5 && cols[4].equals("10000"), "data.consumed.in.nMsg in " + Arrays.toString(cols));
        check(!r.err().contains("Exiting before consuming the expected number"), "stderr " + r.err());
        return "data.consumed.in.nMsg 10000, " + cols[5] + " msg/s";
    }

    String logDirs() throws Exception {
        String t = topic("log-dirs");
        kit.createTopic(t, 1, Kit.numbered("l", 100));
        Tool.Result r = ok(LOG_DIRS, "--describe", "--topic-list", t);
        String json = lines(r.out()).stream().filter(s -> s.startsWith("{")).findFirst().orElse("");
        check(!json.isEmpty(), "no JSON in " + r);
        Matcher m = Pattern.compile("\"partition\":\"" + Pattern.quote(t) + "-0\",\"size\":(\\d+)").matcher(json);
        int replicas = 0;
        while (m.find()) {
            check(Long.parseLong(m.group(1)) > 100 * 2, "replica size " + m.group(1) + " for 100 records in " + json);
            replicas++;
        }
        check(replicas == 3, replicas + " replicas of " + t + "-0 in " + json);
        for (int b = 1; b <= 3; b++) check(json.contains("\"broker\":" + b), "broker " + b + " missing in " + json);
        return "brokers 1-3 each report " + t + "-0 with its size";
    }

    String metadataQuorum() throws Exception {
        Tool.Result status = ok(QUORUM, "describe", "--status");
        Matcher leader = Pattern.compile("LeaderId:\\s+(\\d+)").matcher(status.out());
        check(leader.find(), "no LeaderId in " + status);
        int leaderId = Integer.parseInt(leader.group(1));
        check(leaderId >= 1 && leaderId <= 3, "LeaderId " + leaderId);
        Matcher voters = Pattern.compile("CurrentVoters:\\s+(.*)").matcher(status.out());
        check(voters.find(), "no CurrentVoters in " + status);
        for (int id = 1; id <= 3; id++) {
            check(Pattern.compile("\"id\":\\s*" + id + "\\b").matcher(voters.group(1)).find()
                    || voters.group(1).matches(".*\\b" + id + "\\b.*"), "voter " + id + " missing: " + voters.group(1));
        }
        Tool.Result replication = ok(QUORUM, "describe", "--replication");
        // NodeId DirectoryId LogEndOffset Lag LastFetchTimestamp LastCaughtUpTimestamp Status
        String[] lead = row(replication.out(), Integer.toString(leaderId));
        check(lead[lead.length - 1].equals("Leader"), "the leader's row " + Arrays.toString(lead));
        int followers = 0;
        for (String line : lines(replication.out())) if (line.endsWith("Follower")) followers++;
        check(followers == 2, followers + " followers in " + replication);
        return "--status LeaderId " + leaderId + ", 3 voters; --replication: the leader and 2 followers";
    }
}

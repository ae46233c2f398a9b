// Creates the benches' topics with the admin client: TOPICS (default topic1,topic2), each with
// PARTITIONS partitions (default 1) and REPLICATION_FACTOR replicas (default 3), on
// KAFKA_CONNECTION, with the topic configs of TOPIC_CONFIG ("k=v,k=v", e.g.
// max.message.bytes=2097152, which PAYLOAD_BYTES=1048576 needs: the default limit is 1048588
// bytes per record batch). A topic that already exists is reported on stderr and left as it is.
package dev.onelog.bench;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.errors.TopicExistsException;

public final class CreateTopics {
    public static void main(String[] argv) throws Exception {
        String bootstrap = System.getenv("KAFKA_CONNECTION");
        if (bootstrap == null || bootstrap.isEmpty()) {
            throw new IllegalArgumentException("environment variable KAFKA_CONNECTION is required");
        }
        String topics = env("TOPICS", "topic1,topic2");
        int partitions = Integer.parseInt(env("PARTITIONS", "1"));
        short replicationFactor = Short.parseShort(env("REPLICATION_FACTOR", "3"));
        Map<String, String> configs = new HashMap<>();
        for (String pair : env("TOPIC_CONFIG", "").split(",")) {
            int eq = pair.indexOf('=');
            if (eq > 0) {
                configs.put(pair.substring(0, eq).trim(), pair.substring(eq + 1).trim());
            } else if (!pair.isBlank()) {
                throw new IllegalArgumentException("TOPIC_CONFIG: expected k=v, got " + pair);
            }
        }
        List<NewTopic> requested = new ArrayList<>();
        for (String name : topics.split(",")) {
            requested.add(new NewTopic(name.trim(), partitions, replicationFactor).configs(configs));
        }
        Properties props = new Properties();
        props.setProperty("bootstrap.servers", bootstrap);
        boolean failed = false;
        try (Admin admin = Admin.create(props)) {
            for (Map.Entry<String, KafkaFuture<Void>> result : admin.createTopics(requested).values().entrySet()) {
                try {
                    result.getValue().get();
                    System.err.println("created " + result.getKey());
                } catch (ExecutionException e) {
                    if (e.getCause() instanceof TopicExistsException) {
                        System.err.println("exists " + result.getKey());
                    } else {
                        System.err.println("failed " + result.getKey() + ": " + e.getCause());
                        failed = true;
                    }
                }
            }
        }
        if (failed) {
            System.exit(1);
        }
    }

    private static String env(String name, String fallback) {
        String value = System.getenv(name);
        return value == null || value.isEmpty() ? fallback : value;
    }
}

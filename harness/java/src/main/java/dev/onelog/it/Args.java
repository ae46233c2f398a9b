// Command line of every scenario driver: `<bootstrap> [--name=value ...] [client.key=value ...]`.
// `--name=value` are the driver's own parameters; plain `key=value` pairs are passed to the
// Kafka client untouched, so a test can set any client config (assignor, timeouts) without a
// new driver.
package dev.onelog.it;

import java.util.HashMap;
import java.util.Map;
import java.util.Properties;

final class Args {
    final String bootstrap;
    private final Map<String, String> params = new HashMap<>();
    private final Properties client = new Properties();

    Args(String[] argv) {
        if (argv.length == 0 || argv[0].contains("=")) {
            throw new IllegalArgumentException("usage: <bootstrap> [--name=value ...] [client.key=value ...]");
        }
        bootstrap = argv[0];
        for (int i = 1; i < argv.length; i++) {
            String arg = argv[i];
            int eq = arg.indexOf('=');
            if (eq < 0) {
                throw new IllegalArgumentException("expected name=value, got " + arg);
            }
            String key = arg.substring(0, eq);
            String value = arg.substring(eq + 1);
            if (key.startsWith("--")) {
                params.put(key.substring(2), value);
            } else {
                client.setProperty(key, value);
            }
        }
    }

    String string(String name) {
        String value = params.get(name);
        if (value == null) {
            throw new IllegalArgumentException("missing --" + name + "=...");
        }
        return value;
    }

    String string(String name, String fallback) {
        return params.getOrDefault(name, fallback);
    }

    long number(String name) {
        return Long.parseLong(string(name));
    }

    long number(String name, long fallback) {
        String value = params.get(name);
        return value == null ? fallback : Long.parseLong(value);
    }

    /** Client configs: bootstrap.servers, the given defaults, then the command line's pairs. */
    Properties clientConfig(Map<String, Object> defaults) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.putAll(defaults);
        props.putAll(client);
        return props;
    }
}

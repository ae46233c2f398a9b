// The connection security of every JVM driver (issue #15), from the environment the runner
// sets: COMPAT_SECURITY_PROTOCOL (PLAINTEXT, SSL, SASL_SSL, SASL_PLAINTEXT), COMPAT_SASL_MECHANISM
// (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), COMPAT_SASL_USERNAME / COMPAT_SASL_PASSWORD, and the TLS
// material: COMPAT_SSL_TRUSTSTORE / COMPAT_SSL_KEYSTORE / COMPAT_SSL_STORE_PASSWORD (PKCS#12),
// else COMPAT_SSL_CA (PEM truststore) and COMPAT_SSL_CERT / COMPAT_SSL_KEY (PEM client
// certificate). Read here once, turned into kafka-clients properties (names as in 2.8 .. 4.4).
package dev.onelog.compat;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;

public final class Security {
    private final Map<String, String> env;

    private Security(Map<String, String> env) {
        this.env = env;
    }

    /** The settings of this process's environment. */
    public static Security fromEnv() {
        return new Security(System.getenv());
    }

    /** The same settings with another SASL password (the wrong-password scenario). */
    public Security withPassword(String password) {
        Map<String, String> e = new LinkedHashMap<>(env);
        e.put("COMPAT_SASL_PASSWORD", password);
        return new Security(e);
    }

    /** The same settings without a client certificate (the SSL no-certificate scenario). */
    public Security withoutClientCertificate() {
        Map<String, String> e = new LinkedHashMap<>(env);
        e.remove("COMPAT_SSL_KEYSTORE");
        e.remove("COMPAT_SSL_CERT");
        e.remove("COMPAT_SSL_KEY");
        return new Security(e);
    }

    private String get(String name) {
        String v = env.get(name);
        return v == null || v.isEmpty() ? null : v;
    }

    public String protocol() {
        String p = get("COMPAT_SECURITY_PROTOCOL");
        return p == null ? "PLAINTEXT" : p.toUpperCase(java.util.Locale.ROOT);
    }

    public boolean sasl() {
        return protocol().startsWith("SASL_");
    }

    public boolean tls() {
        return protocol().endsWith("SSL");
    }

    /** The kafka-clients properties: empty for PLAINTEXT. */
    public Map<String, String> properties() {
        Map<String, String> p = new LinkedHashMap<>();
        String protocol = protocol();
        if (protocol.equals("PLAINTEXT")) return p;
        p.put("security.protocol", protocol);
        if (sasl()) {
            String mechanism = get("COMPAT_SASL_MECHANISM") == null ? "SCRAM-SHA-512" : get("COMPAT_SASL_MECHANISM");
            String module = mechanism.equals("PLAIN")
                    ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                    : "org.apache.kafka.common.security.scram.ScramLoginModule";
            p.put("sasl.mechanism", mechanism);
            p.put("sasl.jaas.config", module + " required username=" + jaasQuote(get("COMPAT_SASL_USERNAME"))
                    + " password=" + jaasQuote(get("COMPAT_SASL_PASSWORD")) + ";");
        }
        if (tls()) {
            String password = get("COMPAT_SSL_STORE_PASSWORD");
            if (get("COMPAT_SSL_TRUSTSTORE") != null) {
                p.put("ssl.truststore.type", "PKCS12");
                p.put("ssl.truststore.location", get("COMPAT_SSL_TRUSTSTORE"));
                if (password != null) p.put("ssl.truststore.password", password);
            } else if (get("COMPAT_SSL_CA") != null) {
                p.put("ssl.truststore.type", "PEM");
                p.put("ssl.truststore.location", get("COMPAT_SSL_CA"));
            }
            if (get("COMPAT_SSL_KEYSTORE") != null) {
                p.put("ssl.keystore.type", "PKCS12");
                p.put("ssl.keystore.location", get("COMPAT_SSL_KEYSTORE"));
                if (password != null) p.put("ssl.keystore.password", password);
            } else if (get("COMPAT_SSL_CERT") != null && get("COMPAT_SSL_KEY") != null) {
                // PEM in the values themselves (KIP-651): a key file cannot be named alone.
                p.put("ssl.keystore.type", "PEM");
                p.put("ssl.keystore.certificate.chain", read(get("COMPAT_SSL_CERT")));
                p.put("ssl.keystore.key", read(get("COMPAT_SSL_KEY")));
            }
        }
        return p;
    }

    /** The properties as a client properties file's text (--command-config and the like). */
    public String propertiesFile() throws java.io.IOException {
        Properties props = new Properties();
        props.putAll(properties());
        java.io.StringWriter w = new java.io.StringWriter();
        props.store(w, "COMPAT_SECURITY_PROTOCOL=" + protocol());
        return w.toString();
    }

    /** A string in a JAAS option: double quotes, with backslash and quote escaped. */
    private static String jaasQuote(String s) {
        String v = s == null ? "" : s;
        return "\"" + v.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    private static String read(String path) {
        try {
            return Files.readString(Path.of(path), StandardCharsets.UTF_8);
        } catch (java.io.IOException e) {
            throw new IllegalArgumentException("cannot read " + path + ": " + e, e);
        }
    }
}

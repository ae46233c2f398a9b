// A minimal JSON writer for the drivers' one-line summaries and events (numbers, strings,
// booleans, null, lists, maps), so the module needs no JSON library.
package dev.onelog.it;

import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.Map;

final class Json {
    private Json() {}

    /** An ordered object from alternating keys and values. */
    static Map<String, Object> obj(Object... keysAndValues) {
        Map<String, Object> map = new LinkedHashMap<>();
        for (int i = 0; i + 1 < keysAndValues.length; i += 2) {
            map.put((String) keysAndValues[i], keysAndValues[i + 1]);
        }
        return map;
    }

    /** Prints `value` as one line on stdout and flushes, so a reading process sees it at once. */
    static synchronized void println(Object value) {
        StringBuilder out = new StringBuilder();
        write(out, value);
        System.out.println(out);
        System.out.flush();
    }

    private static void write(StringBuilder out, Object value) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof Number || value instanceof Boolean) {
            out.append(value);
        } else if (value instanceof Map<?, ?> map) {
            out.append('{');
            String sep = "";
            for (Map.Entry<?, ?> e : map.entrySet()) {
                out.append(sep);
                string(out, String.valueOf(e.getKey()));
                out.append(':');
                write(out, e.getValue());
                sep = ",";
            }
            out.append('}');
        } else if (value instanceof Collection<?> items) {
            out.append('[');
            String sep = "";
            for (Object item : items) {
                out.append(sep);
                write(out, item);
                sep = ",";
            }
            out.append(']');
        } else {
            string(out, value.toString());
        }
    }

    private static void string(StringBuilder out, String s) {
        out.append('"');
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        out.append('"');
    }
}

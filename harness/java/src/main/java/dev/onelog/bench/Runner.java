// Runs PRODUCERS workers (one unless PRODUCERS is set), each on its own thread: WARMUP
// unrecorded iterations, then all start together and run TXES recorded ones. Writes the sorted
// latencies to MEASURES (or stdout) and, when asked, the one-line JSON summary.
//
// Transactions run one after another on each worker, as in the original suite: there is no
// compensation for coordinated omission, the point is what one client can get from the
// protocol, not how the system behaves under a given load.
package dev.onelog.bench;

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Locale;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicLong;

final class Runner {
    /** One worker's clients; `iteration` returns the nanoseconds that iteration measured. */
    interface Worker extends AutoCloseable {
        long iteration(int i) throws Exception;

        @Override
        void close();
    }

    interface WorkerFactory {
        Worker open(int index) throws Exception;
    }

    private Runner() {}

    static void run(String bench, BenchConfig cfg, WorkerFactory factory) throws Exception {
        long[][] latencies = new long[cfg.producers][cfg.txes];
        AtomicLong measureStartNanos = new AtomicLong();
        CyclicBarrier start = new CyclicBarrier(cfg.producers, () -> measureStartNanos.set(System.nanoTime()));
        Thread[] threads = new Thread[cfg.producers];
        for (int w = 0; w < cfg.producers; w++) {
            int index = w;
            threads[w] = new Thread(() -> work(cfg, factory, index, start, latencies[index]), bench + "-" + w);
            threads[w].start();
        }
        for (Thread t : threads) {
            t.join();
        }
        double seconds = (System.nanoTime() - measureStartNanos.get()) / 1e9;
        long[] all = Arrays.stream(latencies).flatMapToLong(Arrays::stream).sorted().toArray();
        writeMeasures(cfg, all);
        if (cfg.summary) {
            writeSummary(cfg, summary(bench, cfg, all, seconds));
        }
    }

    /** A failing worker ends the process: the others would wait at the barrier for ever. */
    private static void work(BenchConfig cfg, WorkerFactory factory, int index, CyclicBarrier start, long[] out) {
        try (Worker worker = factory.open(index)) {
            for (int i = 0; i < cfg.warmup; i++) {
                worker.iteration(i);
            }
            start.await();
            for (int i = 0; i < cfg.txes; i++) {
                out[i] = worker.iteration(cfg.warmup + i);
            }
        } catch (Throwable e) {
            System.err.println("worker " + index + " failed: " + e);
            e.printStackTrace();
            System.exit(1);
        }
    }

    private static void writeMeasures(BenchConfig cfg, long[] sorted) throws Exception {
        StringBuilder text = new StringBuilder(sorted.length * 10);
        for (long ns : sorted) {
            text.append(ns).append('\n');
        }
        if (cfg.measures == null) {
            PrintStream out = System.out;
            out.print(text);
            out.flush();
        } else {
            Files.write(Path.of(cfg.measures), text.toString().getBytes(StandardCharsets.UTF_8));
        }
    }

    private static String summary(String bench, BenchConfig cfg, long[] sorted, double seconds) {
        return String.format(Locale.ROOT,
            "{\"bench\":\"%s\",\"kafka_clients\":\"%s\",\"producers\":%d,\"payload_bytes\":%d,"
                + "\"warmup\":%d,\"count\":%d,\"seconds\":%.3f,\"tps\":%.1f,"
                + "\"p50_ms\":%.3f,\"p95_ms\":%.3f,\"p99_ms\":%.3f,\"p999_ms\":%.3f,\"max_ms\":%.3f}",
            bench, kafkaClientsVersion(), cfg.producers, cfg.payloadBytes, cfg.warmup,
            sorted.length, seconds, sorted.length / seconds,
            ms(percentile(sorted, 0.50)), ms(percentile(sorted, 0.95)), ms(percentile(sorted, 0.99)),
            ms(percentile(sorted, 0.999)), ms(sorted[sorted.length - 1]));
    }

    private static void writeSummary(BenchConfig cfg, String line) throws Exception {
        if (cfg.summaryFile == null) {
            System.err.println(line);
        } else {
            Files.write(Path.of(cfg.summaryFile), (line + "\n").getBytes(StandardCharsets.UTF_8));
        }
    }

    /** Nearest-rank percentile of an ascending array. */
    static long percentile(long[] sorted, double q) {
        int rank = (int) Math.ceil(q * sorted.length);
        return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))];
    }

    private static double ms(long nanos) {
        return nanos / 1e6;
    }

    /**
     * The kafka-clients version on the classpath, from the properties file every kafka-clients
     * jar carries (AppInfoParser, which reads it, moved package in 4.4).
     */
    static String kafkaClientsVersion() {
        try (java.io.InputStream in = Runner.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            java.util.Properties p = new java.util.Properties();
            if (in != null) p.load(in);
            return p.getProperty("version", "unknown");
        } catch (java.io.IOException e) {
            return "unknown";
        }
    }
}

// Runs one Kafka command-line tool in this JVM: its main class from the 4.4.0 jars (what
// bin/kafka-*.sh would start), with stdin given, stdout and stderr captured, and Kafka's exit
// procedure turned into an exception so the tool's exit code is seen without the JVM exiting.
// In-process, because a JVM start per tool call would cost more than the scenarios themselves.
package dev.onelog.compat.cli;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.common.utils.internals.Exit;

final class Tool {
    /** What a tool run left: exit code, stdout, stderr. */
    record Result(int code, String out, String err) {
        @Override
        public String toString() {
            return "exit " + code + ", stdout [" + clip(out) + "], stderr [" + clip(err) + "]";
        }

        private static String clip(String s) {
            String t = s.strip();
            return t.length() > 300 ? t.substring(0, 300) + "..." : t;
        }
    }

    /** Thrown by the exit procedure: carries the tool's exit code out of its main. */
    private static final class ToolExit extends RuntimeException {
        ToolExit(int code) {
            super("exit " + code, null, false, false);
        }
    }

    private Tool() {}

    static synchronized Result run(String mainClass, String stdin, String... args) throws Exception {
        System.err.println("tool: " + mainClass + " " + String.join(" ", args));
        PrintStream realOut = System.out;
        PrintStream realErr = System.err;
        InputStream realIn = System.in;
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int code = 0;
        // The first exit call is the tool's verdict: some tools catch Throwable around their own
        // exit call, so the exception may come back as a failure with another code.
        AtomicReference<Integer> firstExit = new AtomicReference<>();
        Exit.setExitProcedure((status, message) -> {
            firstExit.compareAndSet(null, status);
            throw new ToolExit(status);
        });
        Exit.setHaltProcedure((status, message) -> {
            firstExit.compareAndSet(null, status);
            throw new ToolExit(status);
        });
        try {
            System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            System.setIn(new ByteArrayInputStream(stdin.getBytes(StandardCharsets.UTF_8)));
            Class.forName(mainClass).getMethod("main", String[].class).invoke(null, (Object) Arrays.copyOf(args, args.length));
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (!(cause instanceof ToolExit)) {
                // An exception out of main: a JVM would print it and exit 1.
                cause.printStackTrace(System.err);
                code = 1;
            }
        } finally {
            System.out.flush();
            System.err.flush();
            System.setOut(realOut);
            System.setErr(realErr);
            System.setIn(realIn);
            Exit.resetExitProcedure();
            Exit.resetHaltProcedure();
        }
        if (firstExit.get() != null) code = firstExit.get();
        Result result = new Result(code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
        System.err.println("tool: " + result);
        return result;
    }
}

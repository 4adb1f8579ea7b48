package io.jcomm.testkit;

import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.Arrays;

/**
 * Entry point of every worker JVM that {@link MultiJvm} starts: {@code WorkerMain <main class>
 * [args...]}. It watches standard input, which the harness holds open, and halts the JVM as soon as
 * it reaches end-of-file: when the test JVM dies (even by {@code kill -9}) no worker outlives it.
 * Then it runs the real main class; an uncaught exception exits with status 1.
 */
public final class WorkerMain {

    /** Exit status used when the parent (test) process went away. */
    public static final int PARENT_GONE_STATUS = 86;

    private WorkerMain() {
    }

    public static void main(String[] args) throws Throwable {
        if (args.length < 1) {
            System.err.println("usage: WorkerMain <main class> [args...]");
            System.exit(2);
        }
        Thread watcher = new Thread(WorkerMain::watchParent, "parent-watch");
        watcher.setDaemon(true);
        watcher.start();
        Class<?> main = Class.forName(args[0]);
        Method m = main.getMethod("main", String[].class);
        try {
            m.invoke(null, (Object) Arrays.copyOfRange(args, 1, args.length));
        } catch (InvocationTargetException e) {
            Throwable t = e.getCause();
            System.err.println("worker main failed:");
            t.printStackTrace();
            System.err.flush();
            System.out.flush();
            RuntimeHooks.releaseRecorderFile(); // halt skips the shutdown hooks
            Runtime.getRuntime().halt(1);
        }
        System.out.flush();
        System.err.flush();
        // Workers end with halt so that a stray non-daemon thread can never keep them alive (and halt skips
        // the shutdown hook that removes the recorder file)
        RuntimeHooks.releaseRecorderFile();
        Runtime.getRuntime().halt(0);
    }

    private static void watchParent() {
        InputStream in = System.in;
        byte[] buf = new byte[64];
        try {
            while (in.read(buf) >= 0) {
                // ignore input; only end-of-file matters
            }
        } catch (IOException ignored) {
            // broken pipe counts as the parent going away
        }
        RuntimeHooks.releaseRecorderFile();
        Runtime.getRuntime().halt(PARENT_GONE_STATUS);
    }
}

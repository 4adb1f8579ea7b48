package io.jcomm.tools.run;

import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.Arrays;

/**
 * Entry point of every worker JVM that {@code commrun} starts: {@code RunWorker <main class> [args]}, the
 * {@code Main-Class} of the launcher's {@link WorkerJar} (whose class path it then puts back into
 * {@code java.class.path}) or named on the command line.
 *
 * <ul>
 *   <li>Watches standard input, which the launcher holds open and never writes: end-of-file means the
 *       launcher died (even by {@code kill -9}), and the worker exits with {@value #LAUNCHER_GONE_STATUS}
 *       (shutdown hooks run, so that shared-memory files are removed; a halt follows if they hang).</li>
 *   <li>Runs the user's {@code main}; when it returns the JVM exits with 0 (also when stray non-daemon
 *       threads are left, as a script would), when it throws, with 1 after printing the stack trace.</li>
 * </ul>
 * The user's program therefore cannot read standard input (torchrun does not forward it either).
 */
public final class RunWorker {

    /** Exit status of a worker whose launcher went away. */
    public static final int LAUNCHER_GONE_STATUS = 86;
    /** Exit status when the main class cannot be found or has no {@code main(String[])}. */
    public static final int NO_MAIN_STATUS = 2;
    /** How long shutdown hooks may take on exit before the JVM is halted. */
    static final long EXIT_HOOK_LIMIT_MS = 15_000;

    private RunWorker() {
    }

    public static void main(String[] args) {
        if (args.length < 1) {
            System.err.println("usage: RunWorker <main class> [args...]");
            System.exit(NO_MAIN_STATUS);
        }
        // started from the launcher's worker jar (java -jar), the JVM's java.class.path is that jar's path
        // spelled out (Settings.WORKER_CLASS_PATH): this class runs on the user's class path, which need not hold comm-api
        String classPath = System.getProperty("jcomm.worker.class.path");
        if (classPath != null) {
            System.setProperty("java.class.path", classPath);
        }
        Thread watcher = new Thread(RunWorker::watchLauncher, "commrun-launcher-watch");
        watcher.setDaemon(true);
        watcher.start();
        Method main;
        try {
            Class<?> c = Class.forName(args[0], false, RunWorker.class.getClassLoader());
            main = c.getMethod("main", String[].class);
            if (!Modifier.isStatic(main.getModifiers())) {
                throw new NoSuchMethodException("main is not static");
            }
        } catch (ClassNotFoundException | NoClassDefFoundError e) {
            System.err.println("commrun: no class " + args[0] + " on the class path; give a main class (on -cp), a jar, "
                    + RunPlan.DEMO_ALIAS + " or " + RunPlan.MODEL_ALIAS);
            exit(NO_MAIN_STATUS);
            return;
        } catch (NoSuchMethodException e) {
            System.err.println("commrun: " + args[0] + " has no public static void main(String[])");
            exit(NO_MAIN_STATUS);
            return;
        }
        int status = 0;
        try {
            main.invoke(null, (Object) Arrays.copyOfRange(args, 1, args.length));
        } catch (InvocationTargetException e) {
            e.getCause().printStackTrace();
            status = 1;
        } catch (IllegalAccessException e) {
            System.err.println("commrun: cannot call " + args[0] + ".main: " + e.getMessage());
            status = NO_MAIN_STATUS;
        }
        exit(status);
    }

    /** {@link System#exit} (shutdown hooks run) with a halt if the hooks take longer than the limit. */
    static void exit(int status) {
        System.out.flush();
        System.err.flush();
        Thread guard = new Thread(() -> {
            try {
                Thread.sleep(EXIT_HOOK_LIMIT_MS);
            } catch (InterruptedException ignored) {
                return;
            }
            io.jcomm.runtime.recorder.FlightRecorder.releaseFile(); // the hooks did not finish
            Runtime.getRuntime().halt(status);
        }, "commrun-exit-guard");
        guard.setDaemon(true);
        guard.start();
        System.exit(status);
    }

    private static void watchLauncher() {
        InputStream in = System.in;
        byte[] buf = new byte[64];
        try {
            while (in.read(buf) >= 0) {
                // the launcher never writes; only end-of-file matters
            }
        } catch (IOException ignored) {
            // a broken pipe counts as the launcher going away
        }
        exit(LAUNCHER_GONE_STATUS);
    }
}

package io.jcomm.testkit;

import java.lang.reflect.InvocationTargetException;

/**
 * The two pieces of jcomm's runtime ({@code jcomm-runtime}) that the harness calls, looked up by name:
 * comm-api's test-jar cannot depend on the runtime, which depends on comm-api. Every module whose tests
 * start workers or rank threads has the runtime on its class path; without it (comm-api's own tests)
 * there is no recorder file to release and no SDK thread to show.
 */
final class RuntimeHooks {

    private RuntimeHooks() {
    }

    /** {@code io.jcomm.runtime.recorder.FlightRecorder.releaseFile()}: halt skips the shutdown hook that would. */
    static void releaseRecorderFile() {
        call("io.jcomm.runtime.recorder.FlightRecorder", "releaseFile", new Class<?>[0]);
    }

    /** {@code io.jcomm.runtime.ThreadStacks.of(prefixes)}, or "" without the runtime. */
    static String threadStacks(String... prefixes) {
        Object s = call("io.jcomm.runtime.ThreadStacks", "of", new Class<?>[] {String[].class}, (Object) prefixes);
        return s == null ? "" : (String) s;
    }

    private static Object call(String className, String method, Class<?>[] types, Object... args) {
        Class<?> c;
        try {
            c = Class.forName(className);
        } catch (ClassNotFoundException e) {
            return null; // no runtime on the class path
        }
        try {
            return c.getMethod(method, types).invoke(null, args);
        } catch (InvocationTargetException e) {
            throw e.getCause() instanceof RuntimeException r ? r : new IllegalStateException(e.getCause());
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(className + "." + method + " is not callable", e);
        }
    }
}

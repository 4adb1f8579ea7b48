package io.jcomm.api;

/**
 * Who was doing what when an error happened: the group, the caller's rank in it, and the operation.
 * Every {@link CommException} carries one, so that a failure in a job of hundreds of processes says
 * where it happened. A call refused for its arguments or for the state of the object it was made on
 * ({@link #invalidArgument}, {@link #invalidState}) names it the same way in its message.
 *
 * @param group     group name, e.g. {@code tp:0}; {@code "?"} when unknown
 * @param rank      the caller's rank in the group, {@code -1} when unknown
 * @param operation operation name, e.g. {@code allReduce}
 */
public record OpContext(String group, int rank, String operation) {

    /** Context for errors raised outside any group. */
    public static final OpContext NONE = new OpContext("?", -1, "?");

    public OpContext {
        group = group == null ? "?" : group;
        operation = operation == null ? "?" : operation;
    }

    public static OpContext of(String group, int rank, String operation) {
        return new OpContext(group, rank, operation);
    }

    /** The same group and rank, another operation. */
    public OpContext withOperation(String op) {
        return new OpContext(group, rank, op);
    }

    /**
     * A call's arguments were invalid (a programming error, not a communication failure): an
     * {@link IllegalArgumentException} whose message starts with {@code [group=G rank=R op=O]} like a
     * {@link CommException}'s.
     */
    public IllegalArgumentException invalidArgument(String detail) {
        return new IllegalArgumentException("[" + this + "] " + detail);
    }

    /** {@link #invalidArgument(String)} with a cause. */
    public IllegalArgumentException invalidArgument(String detail, Throwable cause) {
        return new IllegalArgumentException("[" + this + "] " + detail, cause);
    }

    /**
     * The call does not fit the state or configuration of the object it was made on (a programming
     * or configuration error, not a communication failure): an {@link IllegalStateException} whose
     * message starts with {@code [group=G rank=R op=O]}.
     */
    public IllegalStateException invalidState(String detail) {
        return new IllegalStateException("[" + this + "] " + detail);
    }

    @Override
    public String toString() {
        return "group=" + group + " rank=" + rank + " op=" + operation;
    }
}

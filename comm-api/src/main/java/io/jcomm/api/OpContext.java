package io.jcomm.api;

/**
 * Who was doing what when an error happened: the group, the caller's rank in it, and the operation.
 * Every {@link CommException} carries one, so that a failure in a job of hundreds of processes says
 * where it happened.
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

    @Override
    public String toString() {
        return "group=" + group + " rank=" + rank + " op=" + operation;
    }
}

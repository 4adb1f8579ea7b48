package io.jcomm.testkit;

/** Worker used by {@link MultiJvmTest}: behaviour chosen by its first argument. */
public final class EchoWorker {

    private EchoWorker() {
    }

    public static void main(String[] args) throws Exception {
        String mode = args.length > 0 ? args[0] : "env";
        int rank = Integer.parseInt(System.getenv("RANK"));
        switch (mode) {
            case "env":
                System.out.println("env rank=" + rank + " world=" + System.getenv("WORLD_SIZE")
                        + " local=" + System.getenv("LOCAL_RANK") + "/" + System.getenv("LOCAL_WORLD_SIZE")
                        + " master=" + System.getenv("MASTER_ADDR") + ":" + System.getenv("MASTER_PORT")
                        + " extra=" + System.getenv("EXTRA"));
                System.out.println("flag aeron=" + ProcessHandle.current().info().arguments()
                        .map(a -> java.util.Arrays.asList(a).contains("java.base/jdk.internal.misc=ALL-UNNAMED")).orElse(false));
                return;
            case "fail-rank-1":
                if (rank == 1) {
                    System.out.println("failing on purpose");
                    throw new IllegalStateException("boom");
                }
                System.out.println("sleeping");
                Thread.sleep(60_000);
                return;
            case "sleep":
                System.out.println("ready " + rank);
                Thread.sleep(60_000);
                return;
            default:
                throw new IllegalArgumentException(mode);
        }
    }
}

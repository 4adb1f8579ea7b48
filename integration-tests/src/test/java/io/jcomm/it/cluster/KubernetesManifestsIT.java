package io.jcomm.it.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.testkit.FreePorts;
import io.jcomm.testkit.Requirements;
import io.jcomm.tools.bench.WorkerJvms;
import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.yaml.snakeyaml.Yaml;

/**
 * The manifests in {@code deploy/}, without a cluster (none can run here): they pass the offline checks
 * ({@code deploy/check/check.mjs}: Kubernetes' schemas for the core kinds, the fields jcomm's mapping needs in
 * the controllers' kinds), and each one's pods, started as JVMs with exactly the environment the manifest
 * and its controller give them, run the TP2 x PP2 demo with every value checked.
 *
 * <p>What stands in for the cluster: each pod is a JVM with its own {@code JCOMM_HOST_ID} (a pod is a host of
 * its own), the pods' DNS names resolve to loopback through a hosts file, and the store's port is a free one
 * instead of the manifest's (two jobs on one machine could not share it). What each controller adds to a
 * pod's environment (the completion index, JobSet's annotation, LWS's and Kubeflow's variables) is written
 * here from their sources. In the Indexed Job case, the first pod's name resolves only 3 s after the pods
 * start, as a pod's record appears only once it runs: every pod keeps retrying, and the job runs.
 */
@Timeout(value = 300)
class KubernetesManifestsIT {

    private static final Path DEPLOY = Path.of("..", "deploy").toAbsolutePath().normalize();
    private static final List<String> MANIFESTS = List.of("indexed-job.yaml", "jobset.yaml", "leaderworkerset.yaml",
            "pytorchjob.yaml");

    @Test
    void theManifestsPassTheOfflineChecks() throws Exception {
        Path work = Path.of("target", "k8s-check").toAbsolutePath();
        Files.createDirectories(work);
        for (String f : List.of("package.json", "check.mjs")) {
            Files.copy(DEPLOY.resolve("check").resolve(f), work.resolve(f), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        }
        boolean node = run(work, 60, "node", "--version").code == 0 && run(work, 60, "npm", "--version").code == 0;
        Requirements.assume("k8s-check", node, "node and npm are needed for the manifests' offline checks");
        if (!Files.isDirectory(work.resolve("node_modules").resolve("kubernetes-models"))) {
            NetResult i = run(work, 240, "npm", "install", "--no-audit", "--no-fund", "--loglevel=error");
            Requirements.assume("k8s-check", i.code == 0, "npm install of kubernetes-models and js-yaml failed: " + i.out);
        }
        List<String> cmd = new ArrayList<>(List.of("node", work.resolve("check.mjs").toString()));
        MANIFESTS.forEach(m -> cmd.add(DEPLOY.resolve(m).toString()));
        NetResult r = run(work, 60, cmd.toArray(String[]::new));
        System.out.print("k8s check:\n" + r.out);
        assertEquals(0, r.code, r.out);
        for (String m : MANIFESTS) {
            assertTrue(r.out.contains("ok   " + m), r.out);
        }
        // the check can fail: the Service without publishNotReadyAddresses, a count as a string
        Path broken = work.resolve("broken.yaml");
        Files.writeString(broken, Files.readString(DEPLOY.resolve("indexed-job.yaml"))
                .replace("publishNotReadyAddresses: true", "publishNotReadyAdresses: true")
                .replace("completions: 4", "completions: \"4\""));
        NetResult b = run(work, 60, "node", work.resolve("check.mjs").toString(), broken.toString());
        assertEquals(1, b.code, b.out);
        assertTrue(b.out.contains("publishNotReadyAddresses: true") && b.out.contains("completions must be integer"), b.out);
    }

    @Test
    void indexedJobPods() throws Exception {
        Map<String, Object> job = doc("indexed-job.yaml", "Job");
        String name = str(job, "metadata", "name");
        Map<String, Object> spec = map(job, "spec");
        Map<String, Object> podSpec = map(spec, "template", "spec");
        String subdomain = (String) podSpec.get("subdomain");
        int completions = (Integer) spec.get("completions");
        List<Pod> pods = new ArrayList<>();
        for (int i = 0; i < completions; i++) {
            String host = name + "-" + i;
            Map<String, String> env = env(podSpec, f -> null);
            env.put("JOB_COMPLETION_INDEX", Integer.toString(i)); // the Job controller
            env.put("HOSTNAME", host); // the kubelet: the pod's host name
            pods.add(new Pod(host, host + "." + subdomain, env, args(podSpec)));
        }
        String out = runPods("indexed-job", pods, 3000);
        assertTrue(out.contains("launched by k8s (Indexed Job): rank 0 of 4 (JOB_COMPLETION_INDEX, WORLD_SIZE)"), out);
    }

    @Test
    void jobSetPods() throws Exception {
        Map<String, Object> js = doc("jobset.yaml", "JobSet");
        String name = str(js, "metadata", "name");
        List<Pod> pods = new ArrayList<>();
        int global = 0;
        for (Object o : (List<?>) map(js, "spec").get("replicatedJobs")) {
            @SuppressWarnings("unchecked")
            Map<String, Object> rj = (Map<String, Object>) o;
            Map<String, Object> jobSpec = map(rj, "template", "spec");
            Map<String, Object> podSpec = map(jobSpec, "template", "spec");
            for (int j = 0; j < (Integer) rj.get("replicas"); j++, global++) {
                for (int p = 0; p < (Integer) jobSpec.get("completions"); p++) {
                    String host = name + "-" + rj.get("name") + "-" + j + "-" + p;
                    String g = Integer.toString(global);
                    Map<String, String> env = env(podSpec, field -> field.equals(
                            "metadata.annotations['jobset.sigs.k8s.io/job-global-index']") ? g : null);
                    env.put("JOB_COMPLETION_INDEX", Integer.toString(p));
                    env.put("HOSTNAME", host);
                    pods.add(new Pod(host, host + "." + name, env, args(podSpec)));
                }
            }
        }
        String out = runPods("jobset", pods, 0);
        assertTrue(out.contains("launched by k8s (JobSet): rank 0 of 4 (JCOMM_K8S_JOB_INDEX x JCOMM_K8S_PODS_PER_JOB + "
                + "JOB_COMPLETION_INDEX, WORLD_SIZE)"), out);
    }

    @Test
    void leaderWorkerSetPods() throws Exception {
        Map<String, Object> lws = doc("leaderworkerset.yaml", "LeaderWorkerSet");
        String name = str(lws, "metadata", "name");
        Map<String, Object> t = map(lws, "spec", "leaderWorkerTemplate");
        int size = (Integer) t.get("size");
        Map<String, Object> podSpec = map(t, "workerTemplate", "spec");
        String leader = name + "-0." + name + ".default"; // group 0's leader under the set's headless Service
        List<Pod> pods = new ArrayList<>();
        for (int w = 0; w < size; w++) {
            String host = w == 0 ? name + "-0" : name + "-0-" + w;
            Map<String, String> env = env(podSpec, f -> null);
            env.put("LWS_LEADER_ADDRESS", leader);
            env.put("LWS_GROUP_SIZE", Integer.toString(size));
            env.put("LWS_WORKER_INDEX", Integer.toString(w));
            env.put("HOSTNAME", host);
            pods.add(new Pod(host, host + "." + name + ".default", env, args(podSpec)));
        }
        String out = runPods("lws", pods, 0);
        assertTrue(out.contains("launched by lws (LeaderWorkerSet): rank 0 of 4 (LWS_WORKER_INDEX, LWS_GROUP_SIZE)"), out);
        assertTrue(out.contains("master " + leader + ":"), out);
    }

    @Test
    void pyTorchJobPods() throws Exception {
        Map<String, Object> pj = doc("pytorchjob.yaml", "PyTorchJob");
        String name = str(pj, "metadata", "name");
        Map<String, Object> specs = map(pj, "spec", "pytorchReplicaSpecs");
        int nproc = Integer.parseInt(String.valueOf(map(pj, "spec").getOrDefault("nprocPerNode", "1")));
        int workers = (Integer) map(specs, "Worker").get("replicas");
        int nodes = 1 + workers;
        List<Pod> pods = new ArrayList<>();
        for (int r = 0; r < nodes; r++) {
            String type = r == 0 ? "Master" : "Worker";
            String host = name + "-" + type.toLowerCase(java.util.Locale.ROOT) + "-" + (r == 0 ? 0 : r - 1);
            Map<String, Object> podSpec = map(specs, type, "template", "spec");
            Map<String, String> env = env(podSpec, f -> null);
            // the training operator (v1): torchrun's variables and PET_*
            env.put("MASTER_ADDR", name + "-master-0");
            env.put("MASTER_PORT", "23456");
            env.put("WORLD_SIZE", Integer.toString(nodes * nproc));
            env.put("RANK", Integer.toString(r));
            env.put("PET_NNODES", Integer.toString(nodes));
            env.put("PET_NODE_RANK", Integer.toString(r));
            env.put("PET_NPROC_PER_NODE", Integer.toString(nproc));
            env.put("HOSTNAME", host);
            pods.add(new Pod(host, host, env, args(podSpec)));
        }
        String out = runPods("pytorchjob", pods, 0);
        assertTrue(out.contains("launched by torchrun: rank 0 of 4 (RANK, WORLD_SIZE)"), out);
        assertTrue(out.contains("master jcomm-demo-master-0:"), out);
    }

    /** One pod: its host name, its DNS name, its environment and the container's arguments. */
    record Pod(String host, String dns, Map<String, String> env, List<String> args) {
    }

    /**
     * Starts the pods as JVMs (the image's entry point: java with the SDK's flags on the tools' class path), the
     * pods' names resolving to loopback (the first pod's only {@code dnsDelayMs} after the start), and returns the
     * output of rank 0's pod once every pod has exited 0.
     */
    private static String runPods(String name, List<Pod> pods, long dnsDelayMs) throws Exception {
        Path dir = Path.of("target", "k8s-" + name).toAbsolutePath();
        Files.createDirectories(dir);
        Path hosts = dir.resolve("hosts");
        StringBuilder all = new StringBuilder("127.0.0.1 localhost\n127.0.0.1 " + java.net.InetAddress.getLocalHost()
                .getHostName() + "\n");
        StringBuilder withoutFirst = new StringBuilder(all);
        for (int i = 0; i < pods.size(); i++) {
            String line = "127.0.0.1 " + pods.get(i).dns() + (pods.get(i).dns().equals(pods.get(i).host()) ? "" : " "
                    + pods.get(i).host()) + "\n";
            all.append(line);
            if (i > 0) {
                withoutFirst.append(line);
            }
        }
        Files.writeString(hosts, dnsDelayMs > 0 ? withoutFirst.toString() : all.toString());
        int port = FreePorts.find();
        List<Process> procs = new ArrayList<>();
        List<Path> logs = new ArrayList<>();
        try {
            for (Pod pod : pods) {
                List<String> cmd = new ArrayList<>(WorkerJvms.javaCommand(List.of("-Xmx256m", "-XX:+UseSerialGC",
                        "-XX:TieredStopAtLevel=1", "-Djdk.net.hosts.file=" + hosts,
                        // a name that did not resolve is looked up again after 1 s, not the JDK's 10 s
                        "-Dsun.net.inetaddr.negative.ttl=1"), io.jcomm.tools.demo.PipelineDemo.class));
                cmd.remove(cmd.size() - 1); // the manifest's arguments name the main class
                cmd.addAll(pod.args());
                Path log = dir.resolve(pod.host() + ".log");
                ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile());
                Map<String, String> e = pb.environment();
                for (String k : List.of("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                        "JCOMM_TOKEN_FILE", "JCOMM_LAUNCHER")) {
                    e.remove(k);
                }
                e.putAll(pod.env());
                e.put("MASTER_PORT", Integer.toString(port));
                e.put("JCOMM_HOST_ID", pod.host()); // a pod is a host of its own
                procs.add(pb.start());
                logs.add(log);
            }
            if (dnsDelayMs > 0) {
                Thread.sleep(dnsDelayMs);
                Files.writeString(hosts, all.toString());
            }
            for (int i = 0; i < procs.size(); i++) {
                assertTrue(procs.get(i).waitFor(120, TimeUnit.SECONDS), pods.get(i).host() + " did not finish:\n"
                        + Files.readString(logs.get(i)));
                assertEquals(0, procs.get(i).exitValue(), pods.get(i).host() + " failed:\n" + Files.readString(logs.get(i)));
            }
            String out = Files.readString(logs.get(0));
            System.out.println("k8s " + name + ": " + out.lines().filter(l -> l.contains("launched by")).findFirst()
                    .orElse("?").trim());
            assertTrue(out.contains("TP=2 x PP=2 (DP=1) on 4 ranks, 4 hosts"), out);
            assertTrue(out.contains("all exact"), out);
            return out;
        } finally {
            procs.forEach(Process::destroyForcibly);
        }
    }

    /** The container's environment as the manifest sets it; {@code field} answers the downward API's fieldRefs. */
    private static Map<String, String> env(Map<String, Object> podSpec, Function<String, String> field) {
        Map<String, String> env = new LinkedHashMap<>();
        Object list = container(podSpec).get("env");
        if (list == null) {
            return env;
        }
        for (Object o : (List<?>) list) {
            Map<?, ?> e = (Map<?, ?>) o;
            String name = (String) e.get("name");
            if (e.containsKey("value")) {
                env.put(name, String.valueOf(e.get("value")));
            } else {
                Map<?, ?> ref = (Map<?, ?>) ((Map<?, ?>) e.get("valueFrom")).get("fieldRef");
                String v = field.apply((String) ref.get("fieldPath"));
                if (v == null) {
                    throw new AssertionError("no value for " + name + " from " + ref.get("fieldPath"));
                }
                env.put(name, v);
            }
        }
        return env;
    }

    private static List<String> args(Map<String, Object> podSpec) {
        List<String> a = new ArrayList<>();
        for (Object o : (List<?>) container(podSpec).get("args")) {
            a.add(String.valueOf(o));
        }
        return a;
    }

    private static Map<?, ?> container(Map<String, Object> podSpec) {
        return (Map<?, ?>) ((List<?>) podSpec.get("containers")).get(0);
    }

    private static Map<String, Object> doc(String file, String kind) throws IOException {
        try (Reader r = Files.newBufferedReader(DEPLOY.resolve(file), StandardCharsets.UTF_8)) {
            for (Object o : new Yaml().loadAll(r)) {
                if (o instanceof Map<?, ?> m && kind.equals(m.get("kind"))) {
                    @SuppressWarnings("unchecked")
                    Map<String, Object> d = (Map<String, Object>) m;
                    return d;
                }
            }
        }
        throw new AssertionError(file + " has no " + kind);
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> map(Map<String, Object> m, String... path) {
        Map<String, Object> cur = m;
        for (String p : path) {
            cur = (Map<String, Object>) cur.get(p);
            if (cur == null) {
                throw new AssertionError("no " + String.join(".", path));
            }
        }
        return cur;
    }

    private static String str(Map<String, Object> m, String a, String b) {
        return (String) map(m, a).get(b);
    }

    record NetResult(int code, String out) {
    }

    private static NetResult run(Path dir, int seconds, String... cmd) throws IOException, InterruptedException {
        Path out = Files.createTempFile(dir, "cmd", ".out");
        try {
            Process p;
            try {
                p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true).redirectOutput(out.toFile())
                        .start();
            } catch (IOException e) {
                return new NetResult(-1, e.getMessage());
            }
            if (!p.waitFor(seconds, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return new NetResult(-1, "timed out: " + String.join(" ", cmd));
            }
            return new NetResult(p.exitValue(), Files.readString(out));
        } finally {
            Files.deleteIfExists(out);
        }
    }
}

package io.jcomm.examples.llama;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Locale;

/**
 * The demo's command line, parsed by hand (this example depends on nothing but jcomm). Immutable once
 * parsed; {@link #parse} throws {@link IllegalArgumentException} with a message for the user.
 */
final class DemoOptions {

    static final String USAGE = String.join("\n",
            "usage: LlamaDemo [--tp N] [--pp N] [--dp N] [--model DIR] [--preset demo|test] [--seed S]",
            "                 [--dtype f32|f16|bf16] [--prompts N] [--tokens N] [--warmup N] [--reference FILE]",
            "                 [--logits-steps K] [--no-check] [--timeout SECONDS]",
            "                 [--pd prefill|decode [--store HOST:PORT] [--slots N] [--block-tokens N] [--max-seq N]]",
            "                 [--workload default|shared-prefix [--groups N] [--per-group N] [--system-tokens N]",
            "                  [--question-tokens N]] [--prefix-cache [--kv-blocks N] [--compare-reuse] [--no-kv-events]",
            "                  [--kv-instance NAME] [--kv-hold] [--kv-release] [--store HOST:PORT]]",
            "",
            "Runs a Llama decoder sharded over the job's ranks (TP x PP x DP = the world size; default TP = world),",
            "greedy, and checks its tokens against a one-process run of the same weights (--no-check: not) or",
            "against torch's reference (--reference, from scripts/llama_reference.py). Without --model, or with a",
            "--model directory that holds no config.json, the seeded model of --preset is written first",
            "(default: demo, hidden 512, 8 layers, vocab 32,000, in the temporary directory).",
            "--pd prefill|decode: two jobs; prefill runs the prompts and writes their KV blocks into the decode",
            "job's cache (kv-transfer), decode continues them. Start decode first; prefill names its store.",
            "--prefix-cache: reuse the KV blocks of cached prefixes (this job's, other jobs' on this host through",
            "the host's block index, other hosts' through their KV events in the --store the jobs share) instead of",
            "computing them; --compare-reuse runs the requests without reuse first and checks the tokens are equal;",
            "--kv-hold keeps serving the blocks after the run until a job run with --kv-release ends.");

    int tp = -1;
    int pp = 1;
    int dp = 1;
    Path model;
    String preset = "demo";
    long seed = 16;
    String dtype = "F32";
    int prompts = 4;
    int tokens = 64;
    int warmup = 32;
    Path reference;
    int logitsSteps = 4;
    boolean check = true;
    Duration timeout;
    String pd;
    String store;
    int slots = 2;
    int blockTokens = 16;
    int maxSeq = 256;
    String workload = "default";
    int groups = 4;
    int perGroup = 4;
    int systemTokens = 96;
    int questionTokens = 16;
    boolean prefixCache;
    int kvBlocks = 256;
    boolean compareReuse;
    boolean kvEvents = true;
    String kvInstance;
    boolean kvHold;
    boolean kvRelease;
    boolean help;

    static DemoOptions parse(String[] args) {
        DemoOptions o = new DemoOptions();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "--tp":
                    o.tp = positive(a, value(args, ++i, a));
                    break;
                case "--pp":
                    o.pp = positive(a, value(args, ++i, a));
                    break;
                case "--dp":
                    o.dp = positive(a, value(args, ++i, a));
                    break;
                case "--model":
                    o.model = Path.of(value(args, ++i, a));
                    break;
                case "--preset":
                    o.preset = value(args, ++i, a);
                    if (!o.preset.equals("demo") && !o.preset.equals("test")) {
                        throw new IllegalArgumentException("--preset is demo or test, not " + o.preset);
                    }
                    break;
                case "--seed":
                    o.seed = Long.parseLong(value(args, ++i, a));
                    break;
                case "--dtype":
                    o.dtype = value(args, ++i, a).toUpperCase(Locale.ROOT);
                    if (!o.dtype.equals("F32") && !o.dtype.equals("F16") && !o.dtype.equals("BF16")) {
                        throw new IllegalArgumentException("--dtype is f32, f16 or bf16");
                    }
                    break;
                case "--prompts":
                    o.prompts = positive(a, value(args, ++i, a));
                    break;
                case "--tokens":
                    o.tokens = positive(a, value(args, ++i, a));
                    break;
                case "--warmup":
                    o.warmup = nonNegative(a, value(args, ++i, a));
                    break;
                case "--reference":
                    o.reference = Path.of(value(args, ++i, a));
                    break;
                case "--logits-steps":
                    o.logitsSteps = nonNegative(a, value(args, ++i, a));
                    break;
                case "--no-check":
                    o.check = false;
                    break;
                case "--timeout":
                    o.timeout = Duration.ofSeconds(positive(a, value(args, ++i, a)));
                    break;
                case "--pd":
                    o.pd = value(args, ++i, a);
                    if (!o.pd.equals("prefill") && !o.pd.equals("decode")) {
                        throw new IllegalArgumentException("--pd is prefill or decode, not " + o.pd);
                    }
                    break;
                case "--store":
                    o.store = value(args, ++i, a);
                    break;
                case "--slots":
                    o.slots = positive(a, value(args, ++i, a));
                    break;
                case "--block-tokens":
                    o.blockTokens = positive(a, value(args, ++i, a));
                    break;
                case "--max-seq":
                    o.maxSeq = positive(a, value(args, ++i, a));
                    break;
                case "--workload":
                    o.workload = value(args, ++i, a);
                    if (!o.workload.equals("default") && !o.workload.equals("shared-prefix")) {
                        throw new IllegalArgumentException("--workload is default or shared-prefix, not " + o.workload);
                    }
                    break;
                case "--groups":
                    o.groups = positive(a, value(args, ++i, a));
                    break;
                case "--per-group":
                    o.perGroup = positive(a, value(args, ++i, a));
                    break;
                case "--system-tokens":
                    o.systemTokens = positive(a, value(args, ++i, a));
                    break;
                case "--question-tokens":
                    o.questionTokens = positive(a, value(args, ++i, a));
                    break;
                case "--prefix-cache":
                    o.prefixCache = true;
                    break;
                case "--kv-blocks":
                    o.kvBlocks = positive(a, value(args, ++i, a));
                    break;
                case "--compare-reuse":
                    o.compareReuse = true;
                    break;
                case "--no-kv-events":
                    o.kvEvents = false;
                    break;
                case "--kv-instance":
                    o.kvInstance = value(args, ++i, a);
                    break;
                case "--kv-hold":
                    o.kvHold = true;
                    break;
                case "--kv-release":
                    o.kvRelease = true;
                    break;
                case "-h":
                case "--help":
                    o.help = true;
                    return o;
                default:
                    throw new IllegalArgumentException("unknown option " + a);
            }
        }
        if ((o.compareReuse || o.kvHold || o.kvRelease) && !o.prefixCache) {
            throw new IllegalArgumentException("--compare-reuse, --kv-hold and --kv-release go with --prefix-cache");
        }
        if (o.prefixCache && o.pd != null) {
            throw new IllegalArgumentException("--prefix-cache and --pd are separate modes");
        }
        if (o.pd != null && o.dp != 1) {
            throw new IllegalArgumentException("--pd runs one replica per job (--dp 1)");
        }
        return o;
    }

    /** The model of {@link #preset}. */
    LlamaConfig presetConfig() {
        if (preset.equals("test")) {
            return new LlamaConfig(256, 688, 4, 8, 2, 32, 8000, 1e-5, 10000.0, false);
        }
        return new LlamaConfig(512, 1408, 8, 8, 2, 64, 32000, 1e-5, 10000.0, false);
    }

    private static String value(String[] args, int i, String option) {
        if (i >= args.length) {
            throw new IllegalArgumentException(option + " needs a value");
        }
        return args[i];
    }

    private static int positive(String option, String v) {
        int n = integer(option, v);
        if (n < 1) {
            throw new IllegalArgumentException(option + " must be >= 1, got " + v);
        }
        return n;
    }

    private static int nonNegative(String option, String v) {
        int n = integer(option, v);
        if (n < 0) {
            throw new IllegalArgumentException(option + " must be >= 0, got " + v);
        }
        return n;
    }

    private static int integer(String option, String v) {
        try {
            return Integer.parseInt(v);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(option + " takes an integer, not " + v);
        }
    }
}

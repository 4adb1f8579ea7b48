package io.jcomm.examples.llama;

/**
 * The arithmetic of the decoder, in float32 with plain loops (no vector API, no native code): it is
 * meant to be read and to be correct, not fast. Matrices are row-major {@code float[]}; a weight
 * matrix of {@code rows x cols} maps a vector of {@code cols} to one of {@code rows}, as
 * {@code torch.nn.Linear} does with its {@code [out, in]} weight.
 */
final class Kernels {

    private Kernels() {
    }

    /**
     * {@code out[t][r] = sum_c w[r][c] * x[t][c]} for {@code T} input rows: {@code x} is
     * {@code T x cols}, {@code out} is {@code T x rows}. Each weight row is used for every token while
     * it is in cache.
     */
    static void matmul(float[] w, int rows, int cols, float[] x, int tokens, float[] out) {
        for (int r = 0; r < rows; r++) {
            int wo = r * cols;
            for (int t = 0; t < tokens; t++) {
                out[t * rows + r] = dot(w, wo, x, t * cols, cols);
            }
        }
    }

    /**
     * A dot product over {@code n} elements with four partial sums: four independent dependency
     * chains let the CPU overlap the additions (one chain runs ~4x slower), and the order of a float
     * sum is not torch's anyway (its kernels block and vectorize theirs).
     */
    static float dot(float[] a, int ao, float[] b, int bo, int n) {
        float s0 = 0;
        float s1 = 0;
        float s2 = 0;
        float s3 = 0;
        int i = 0;
        for (; i + 3 < n; i += 4) {
            s0 += a[ao + i] * b[bo + i];
            s1 += a[ao + i + 1] * b[bo + i + 1];
            s2 += a[ao + i + 2] * b[bo + i + 2];
            s3 += a[ao + i + 3] * b[bo + i + 3];
        }
        for (; i < n; i++) {
            s0 += a[ao + i] * b[bo + i];
        }
        return (s0 + s1) + (s2 + s3);
    }

    /**
     * Hugging Face's {@code LlamaRMSNorm} on each of {@code T} rows of {@code x}:
     * {@code weight * x / sqrt(mean(x^2) + eps)} into {@code out}.
     */
    static void rmsNorm(float[] x, float[] weight, float eps, int tokens, int hidden, float[] out) {
        for (int t = 0; t < tokens; t++) {
            int o = t * hidden;
            double ss = 0;
            for (int i = 0; i < hidden; i++) {
                ss += (double) x[o + i] * x[o + i];
            }
            float inv = (float) (1.0 / Math.sqrt((float) (ss / hidden) + eps));
            for (int i = 0; i < hidden; i++) {
                out[o + i] = weight[i] * (x[o + i] * inv);
            }
        }
    }

    /** {@code acc += x}, element-wise over {@code n}. */
    static void addInto(float[] acc, float[] x, int n) {
        for (int i = 0; i < n; i++) {
            acc[i] += x[i];
        }
    }

    /** SwiGLU: {@code out[t][i] = silu(gateUp[t][i]) * gateUp[t][ff + i]} (gate and up fused per row). */
    static void swiglu(float[] gateUp, int tokens, int ff, float[] out) {
        for (int t = 0; t < tokens; t++) {
            int g = t * 2 * ff;
            for (int i = 0; i < ff; i++) {
                float x = gateUp[g + i];
                float silu = (float) (x / (1.0 + Math.exp(-x)));
                out[t * ff + i] = silu * gateUp[g + ff + i];
            }
        }
    }

    /**
     * The rotary frequencies of Hugging Face's Llama: {@code 1 / theta^(2i / headDim)} for
     * {@code i < headDim / 2}, computed in float as torch does.
     */
    static float[] inverseFrequencies(double theta, int headDim) {
        float[] f = new float[headDim / 2];
        for (int i = 0; i < f.length; i++) {
            float exponent = (float) (2 * i) / headDim;
            f[i] = 1.0f / (float) Math.pow((float) theta, exponent);
        }
        return f;
    }

    /**
     * Rotates {@code heads} vectors of {@code headDim} at {@code x[offset..]} for position
     * {@code pos}, the {@code rotate_half} convention: element {@code i} pairs with
     * {@code i + headDim / 2}, {@code x' = x cos + rotate_half(x) sin} with
     * {@code rotate_half(x) = [-x2, x1]}.
     */
    static void rope(float[] x, int offset, int heads, int headDim, int pos, float[] invFreq, float[] cos, float[] sin) {
        int half = headDim / 2;
        for (int i = 0; i < half; i++) {
            float angle = (float) pos * invFreq[i];
            cos[i] = (float) Math.cos(angle);
            sin[i] = (float) Math.sin(angle);
        }
        for (int h = 0; h < heads; h++) {
            int o = offset + h * headDim;
            for (int i = 0; i < half; i++) {
                float x1 = x[o + i];
                float x2 = x[o + half + i];
                x[o + i] = x1 * cos[i] - x2 * sin[i];
                x[o + half + i] = x2 * cos[i] + x1 * sin[i];
            }
        }
    }

    /** Index of the largest of {@code x[0..n)}, the first one on a tie (torch.argmax's choice). */
    static int argmax(float[] x, int n) {
        int best = 0;
        for (int i = 1; i < n; i++) {
            if (x[i] > x[best]) {
                best = i;
            }
        }
        return best;
    }
}

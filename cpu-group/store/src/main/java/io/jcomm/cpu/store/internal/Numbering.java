package io.jcomm.cpu.store.internal;

import java.util.Arrays;

/**
 * How a generation of PyTorch numbers the {@link Op}s on the wire (the command byte).
 *
 * <table>
 *   <caption>Command codes</caption>
 *   <tr><th>numbering</th><th>torch</th><th>codes</th></tr>
 *   <tr><td>{@link #TORCH_1_13}</td><td>1.13, 2.0</td><td>SET 0 .. GETNUMKEYS 6, WATCH_KEY 7, DELETE_KEY 8</td></tr>
 *   <tr><td>{@link #TORCH_2_1}</td><td>2.1</td><td>.. GETNUMKEYS 6, DELETE_KEY 7, APPEND 8, MULTI_GET 9, MULTI_SET 10, CANCEL_WAIT 11</td></tr>
 *   <tr><td>{@link #TORCH_2_2}</td><td>2.2+</td><td>VALIDATE 0, SET 1 .. CANCEL_WAIT 12, PING 13</td></tr>
 * </table>
 */
public enum Numbering {
    TORCH_1_13(Op.SET, Op.COMPARE_SET, Op.GET, Op.ADD, Op.CHECK, Op.WAIT, Op.GETNUMKEYS, Op.WATCH_KEY,
            Op.DELETE_KEY),
    TORCH_2_1(Op.SET, Op.COMPARE_SET, Op.GET, Op.ADD, Op.CHECK, Op.WAIT, Op.GETNUMKEYS, Op.DELETE_KEY,
            Op.APPEND, Op.MULTI_GET, Op.MULTI_SET, Op.CANCEL_WAIT),
    TORCH_2_2(Op.VALIDATE, Op.SET, Op.COMPARE_SET, Op.GET, Op.ADD, Op.CHECK, Op.WAIT, Op.GETNUMKEYS,
            Op.DELETE_KEY, Op.APPEND, Op.MULTI_GET, Op.MULTI_SET, Op.CANCEL_WAIT, Op.PING);

    private final Op[] byCode;
    private final int[] codeOf;

    Numbering(Op... ops) {
        this.byCode = ops;
        this.codeOf = new int[Op.values().length];
        Arrays.fill(codeOf, -1);
        for (int i = 0; i < ops.length; i++) {
            codeOf[ops[i].ordinal()] = i;
        }
    }

    /** The op for a command byte (0..255), or {@code null} when this numbering has none. */
    public Op decode(int code) {
        return code >= 0 && code < byCode.length ? byCode[code] : null;
    }

    /** The command byte of {@code op}, or -1 when this numbering lacks it. */
    public int code(Op op) {
        return codeOf[op.ordinal()];
    }

    public boolean supports(Op op) {
        return codeOf[op.ordinal()] >= 0;
    }
}

package io.jcomm.cpu.store;

import io.jcomm.cpu.store.internal.Numbering;

/**
 * Which PyTorch TCPStore generation a {@link TcpStore} client speaks. Pick the one of the server
 * you talk to: a torch server understands only its own generation (a 2.x server drops a legacy
 * client, a 1.13 server cannot parse VALIDATE). A jcomm {@link TcpStoreServer} understands all of
 * them.
 */
public enum TcpStoreDialect {
    /**
     * torch 1.13 / 2.0 (the default): no first message; no APPEND, MULTI_GET, MULTI_SET or
     * CANCEL_WAIT, which the client emulates (see {@link TcpStore}).
     */
    TORCH_1_13(Numbering.TORCH_1_13, false, false),
    /** torch 2.1: legacy numbering plus APPEND, MULTI_GET, MULTI_SET, CANCEL_WAIT. */
    TORCH_2_1(Numbering.TORCH_2_1, false, false),
    /** torch 2.2 - 2.4: VALIDATE first, renumbered commands. */
    TORCH_2_2(Numbering.TORCH_2_2, true, false),
    /** torch 2.5 and later: VALIDATE, then PING. */
    TORCH_2_5(Numbering.TORCH_2_2, true, true);

    private final Numbering numbering;
    private final boolean validate;
    private final boolean ping;

    TcpStoreDialect(Numbering numbering, boolean validate, boolean ping) {
        this.numbering = numbering;
        this.validate = validate;
        this.ping = ping;
    }

    Numbering numbering() {
        return numbering;
    }

    boolean sendsValidate() {
        return validate;
    }

    boolean sendsPing() {
        return ping;
    }
}

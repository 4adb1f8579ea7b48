package io.jcomm.cpu.store.internal;

import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import java.io.IOException;

/**
 * On the listening channel: when an accept fails because the process is out of descriptors
 * ({@code EMFILE}/{@code ENFILE}, "Too many open files"), closes the oldest pending connection so that
 * the next accept can succeed, instead of leaving every newcomer in the backlog. Other errors are
 * logged and the listener goes on.
 */
public final class DescriptorPressure extends ChannelInboundHandlerAdapter {

    private final ServerContext sc;

    public DescriptorPressure(ServerContext sc) {
        this.sc = sc;
    }

    @Override
    public boolean isSharable() {
        return true;
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        String msg = String.valueOf(cause.getMessage());
        if (cause instanceof IOException && msg.contains("open files")) {
            if (!sc.relieveDescriptorPressure()) {
                sc.warnRateLimited(sc.name + ": accept failed (" + msg + ") and no pending connection can give way");
            }
        } else {
            sc.warnRateLimited(sc.name + ": listener error: " + cause);
        }
    }
}

package io.jcomm.cpu.internal.tcp;

import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandler;

/**
 * A {@link ChannelInboundHandler} whose events pass on to the next handler unless the implementation
 * handles them, as they do through Netty's {@code ChannelInboundHandlerAdapter}, but without the
 * adapter's annotations: for an adapter's subclass the pipeline reads {@code @Sharable} and
 * {@code @Skip}, and the first annotation a JVM reads makes it parse the annotation types and generate
 * their proxy classes, ~20 ms of a cold rank's CPU before its first group is up. These methods carry
 * no run-time annotations (so no event is skipped: each one is passed on here).
 */
interface PassThroughInbound extends ChannelInboundHandler {

    @Override
    default void handlerAdded(ChannelHandlerContext ctx) {
    }

    @Override
    default void handlerRemoved(ChannelHandlerContext ctx) {
    }

    @Override
    default void channelRegistered(ChannelHandlerContext ctx) {
        ctx.fireChannelRegistered();
    }

    @Override
    default void channelUnregistered(ChannelHandlerContext ctx) {
        ctx.fireChannelUnregistered();
    }

    @Override
    default void channelActive(ChannelHandlerContext ctx) {
        ctx.fireChannelActive();
    }

    @Override
    default void channelInactive(ChannelHandlerContext ctx) {
        ctx.fireChannelInactive();
    }

    @Override
    default void channelRead(ChannelHandlerContext ctx, Object msg) {
        ctx.fireChannelRead(msg);
    }

    @Override
    default void channelReadComplete(ChannelHandlerContext ctx) {
        ctx.fireChannelReadComplete();
    }

    @Override
    default void userEventTriggered(ChannelHandlerContext ctx, Object evt) {
        ctx.fireUserEventTriggered(evt);
    }

    @Override
    default void channelWritabilityChanged(ChannelHandlerContext ctx) {
        ctx.fireChannelWritabilityChanged();
    }

    @Override
    @SuppressWarnings("deprecation") // declared by ChannelInboundHandler, deprecated on ChannelHandler only
    default void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        ctx.fireExceptionCaught(cause);
    }
}

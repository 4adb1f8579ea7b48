package io.jcomm.cpu.internal.tcp;

import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelPromise;
import io.netty.channel.DefaultChannelPromise;
import io.netty.channel.IoEventLoop;
import io.netty.channel.IoEventLoopGroup;
import io.netty.channel.IoHandle;
import io.netty.channel.IoHandler;
import io.netty.channel.IoHandlerContext;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.IoRegistration;
import io.netty.util.concurrent.AbstractScheduledEventExecutor;
import io.netty.util.concurrent.DefaultPromise;
import io.netty.util.concurrent.EventExecutor;
import io.netty.util.concurrent.Future;
import io.netty.util.concurrent.GlobalEventExecutor;
import io.netty.util.concurrent.Promise;
import io.netty.util.concurrent.ThreadAwareExecutor;
import io.netty.util.internal.ThreadExecutorMap;
import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * A Netty event loop driven by whichever thread currently runs a collective: the caller's thread
 * does its own I/O, so a collective costs no thread hand-off (Netty's {@code ManualIoEventLoop} does
 * the same but binds one thread for life; a process group's calls may come from the application
 * thread or from its asynchronous worker, one at a time).
 *
 * <p>Contract: at most one thread drives the loop at a time; it calls {@link #own(Thread)} before
 * {@link #runNow()} / {@link #runBlocking(long)}. Channel operations are made from the driving thread
 * (they then run inline); {@link #execute} from any other thread queues a task and wakes the loop.
 * {@link #wakeup()} may be called from any thread. Epoll's and NIO's I/O handlers support a change of
 * thread between runs ({@link IoHandlerFactory#isChangingThreadSupported()}).
 */
final class DrivenEventLoop extends AbstractScheduledEventExecutor implements IoEventLoop {

    private static final int RUNNING = 0;
    private static final int SHUTTING_DOWN = 1;
    private static final int TERMINATED = 2;

    private final IoHandler handler;
    private final Queue<Runnable> tasks = new ConcurrentLinkedQueue<>();
    private final Promise<Void> termination = new DefaultPromise<>(GlobalEventExecutor.INSTANCE);
    private final Context context = new Context();
    private volatile Thread owner;
    private volatile int state = RUNNING;
    private boolean initialized;

    DrivenEventLoop(IoHandlerFactory factory) {
        this.handler = factory.newHandler(new ThreadAwareExecutor() {
            @Override
            public boolean isExecutorThread(Thread thread) {
                return inEventLoop(thread);
            }

            @Override
            public void execute(Runnable command) {
                DrivenEventLoop.this.execute(command);
            }
        });
    }

    /** Makes {@code thread} the driving thread (no other thread may be driving at the time). */
    void own(Thread thread) {
        owner = thread;
    }

    /** Processes ready I/O and queued tasks without blocking; returns the amount of work done. */
    int runNow() {
        return run(-1);
    }

    /** Waits up to {@code nanos} for I/O or a task, processes what is ready, returns the work done. */
    int runBlocking(long nanos) {
        return run(Math.max(1, nanos));
    }

    private int run(long blockNanos) {
        if (owner != Thread.currentThread()) {
            throw new IllegalStateException("event loop driven by a thread that does not own it");
        }
        if (!initialized) {
            initialized = true;
            handler.initialize();
        }
        EventExecutor old = ThreadExecutorMap.setCurrentExecutor(this);
        try {
            if (state != RUNNING) {
                return runTasks();
            }
            context.blockNanos = blockNanos;
            int n = handler.run(context);
            return n + runTasks();
        } finally {
            ThreadExecutorMap.setCurrentExecutor(old);
        }
    }

    private int runTasks() {
        fetchFromScheduledTaskQueue(tasks);
        int n = 0;
        Runnable r;
        while ((r = tasks.poll()) != null) {
            safeExecute(r);
            n++;
        }
        return n;
    }

    /** Wakes a thread blocked in {@link #runBlocking}. Any thread. */
    void wakeup() {
        if (state == RUNNING) {
            handler.wakeup();
        }
    }

    /**
     * Releases the I/O handler (epoll or selector descriptors). Called by the driving thread after
     * every channel was closed.
     */
    void destroy() {
        if (state == TERMINATED) {
            return;
        }
        state = SHUTTING_DOWN;
        EventExecutor old = ThreadExecutorMap.setCurrentExecutor(this);
        try {
            runTasks();
            if (initialized) {
                handler.prepareToDestroy();
                handler.destroy();
            }
            runTasks();
        } finally {
            ThreadExecutorMap.setCurrentExecutor(old);
            cancelScheduledTasks();
            state = TERMINATED;
            termination.trySuccess(null);
        }
    }

    // ---- EventExecutor / IoEventLoop plumbing ----

    @Override
    public boolean inEventLoop(Thread thread) {
        return thread == owner;
    }

    @Override
    public void execute(Runnable command) {
        if (state == TERMINATED) {
            throw new RejectedExecutionException("event loop terminated");
        }
        tasks.add(command);
        if (!inEventLoop()) {
            wakeup();
        }
    }

    @Override
    public Future<IoRegistration> register(IoHandle handle) {
        Promise<IoRegistration> promise = newPromise();
        Runnable r = () -> {
            try {
                promise.setSuccess(handler.register(handle));
            } catch (Exception e) {
                promise.setFailure(e);
            }
        };
        if (inEventLoop()) {
            r.run();
        } else {
            execute(r);
        }
        return promise;
    }

    @Deprecated
    @Override
    public ChannelFuture register(Channel channel) {
        return register(channel, new DefaultChannelPromise(channel, this));
    }

    @Deprecated
    @Override
    public ChannelFuture register(ChannelPromise promise) {
        promise.channel().unsafe().register(this, promise);
        return promise;
    }

    @Deprecated
    @Override
    public ChannelFuture register(Channel channel, ChannelPromise promise) {
        channel.unsafe().register(this, promise);
        return promise;
    }

    @Override
    public boolean isCompatible(Class<? extends IoHandle> handleType) {
        return handler.isCompatible(handleType);
    }

    @Override
    public boolean isIoType(Class<? extends IoHandler> handlerType) {
        return handler.getClass().equals(handlerType);
    }

    @Override
    public DrivenEventLoop next() {
        return this;
    }

    @Override
    public IoEventLoopGroup parent() {
        return null;
    }

    @Override
    public boolean isShuttingDown() {
        return state != RUNNING;
    }

    @Override
    public Future<?> shutdownGracefully(long quietPeriod, long timeout, TimeUnit unit) {
        // the owner of the backend destroys the loop explicitly (destroy()); nothing to do here
        return termination;
    }

    @Override
    public Future<?> terminationFuture() {
        return termination;
    }

    @Deprecated
    @Override
    public void shutdown() {
        // see shutdownGracefully
    }

    @Override
    public boolean isShutdown() {
        return state == TERMINATED;
    }

    @Override
    public boolean isTerminated() {
        return state == TERMINATED;
    }

    @Override
    public boolean awaitTermination(long timeout, TimeUnit unit) throws InterruptedException {
        return termination.await(timeout, unit);
    }

    /** Blocking or not, with a bound on the blocking time and the scheduled tasks taken into account. */
    private final class Context implements IoHandlerContext {
        long blockNanos = -1;

        @Override
        public boolean canBlock() {
            return blockNanos >= 0 && tasks.isEmpty();
        }

        @Override
        public long delayNanos(long currentTimeNanos) {
            if (blockNanos < 0) {
                return 0;
            }
            return Math.min(blockNanos, DrivenEventLoop.this.delayNanos(currentTimeNanos, blockNanos));
        }

        @Override
        public long deadlineNanos() {
            if (blockNanos < 0) {
                return -1;
            }
            long max = ticker().nanoTime() + blockNanos;
            long next = nextScheduledTaskDeadlineNanos();
            return next == -1 ? max : Math.min(next, max);
        }
    }
}

package io.jcomm.cpu.store;

import io.jcomm.api.store.Store;
import java.time.Duration;

/** Runs the {@link StoreContractTest} kit against a {@link TcpStoreServer} with one client dialect. */
abstract class AbstractTcpStoreTest extends StoreContractTest {

    static final byte[] TOKEN = "0123456789abcdef-test-token".getBytes(java.nio.charset.StandardCharsets.US_ASCII);

    protected TcpStoreServer server;

    protected abstract TcpStoreDialect dialect();

    protected boolean probe() {
        return true;
    }

    protected byte[] token() {
        return null;
    }

    @Override
    protected void setUpBacking() {
        server = TcpStoreServer.start(TcpStoreServerConfig.builder().token(token()).name("test-store").build());
    }

    @Override
    protected Store newStore() {
        return TcpStore.connect(TcpStoreConfig.builder().port(server.port()).dialect(dialect()).probe(probe())
                .token(token()).timeout(Duration.ofSeconds(20)).build());
    }

    @Override
    protected void tearDownBacking() {
        server.close();
    }
}

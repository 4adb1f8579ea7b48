package io.jcomm.cpu.store;

/** Store kit: jcomm client and server with a job token. */
class TcpStoreTokenTest extends AbstractTcpStoreTest {

    @Override
    protected TcpStoreDialect dialect() {
        return TcpStoreDialect.TORCH_1_13;
    }

    @Override
    protected byte[] token() {
        return TOKEN;
    }
}

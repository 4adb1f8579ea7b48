package io.jcomm.cpu.store;

/** Store kit: a client that behaves exactly like torch 1.13's. */
class TcpStoreLegacyNoProbeTest extends AbstractTcpStoreTest {

    @Override
    protected TcpStoreDialect dialect() {
        return TcpStoreDialect.TORCH_1_13;
    }

    @Override
    protected boolean probe() {
        return false;
    }
}

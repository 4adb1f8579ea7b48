package io.jcomm.cpu.store;

/** Store kit: a client that behaves like torch 2.5's (VALIDATE, PING, CANCEL_WAIT). */
class TcpStoreTorch25NoProbeTest extends AbstractTcpStoreTest {

    @Override
    protected TcpStoreDialect dialect() {
        return TcpStoreDialect.TORCH_2_5;
    }

    @Override
    protected boolean probe() {
        return false;
    }
}

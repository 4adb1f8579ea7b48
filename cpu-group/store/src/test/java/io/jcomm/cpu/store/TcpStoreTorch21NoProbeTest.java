package io.jcomm.cpu.store;

/** Store kit: torch 2.1 numbering without the probe (exercises the server's legacy disambiguation). */
class TcpStoreTorch21NoProbeTest extends AbstractTcpStoreTest {

    @Override
    protected TcpStoreDialect dialect() {
        return TcpStoreDialect.TORCH_2_1;
    }

    @Override
    protected boolean probe() {
        return false;
    }
}

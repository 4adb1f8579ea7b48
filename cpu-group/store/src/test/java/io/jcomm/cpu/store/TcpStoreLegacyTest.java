package io.jcomm.cpu.store;

/** Store kit: jcomm client, legacy dialect (upgraded by the probe). */
class TcpStoreLegacyTest extends AbstractTcpStoreTest {

    @Override
    protected TcpStoreDialect dialect() {
        return TcpStoreDialect.TORCH_1_13;
    }
}

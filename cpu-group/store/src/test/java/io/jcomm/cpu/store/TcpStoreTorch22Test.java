package io.jcomm.cpu.store;

/** Store kit: jcomm client, 2.2 dialect. */
class TcpStoreTorch22Test extends AbstractTcpStoreTest {

    @Override
    protected TcpStoreDialect dialect() {
        return TcpStoreDialect.TORCH_2_2;
    }
}

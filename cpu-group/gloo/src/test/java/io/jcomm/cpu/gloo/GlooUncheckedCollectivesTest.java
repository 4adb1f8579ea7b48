package io.jcomm.cpu.gloo;

import java.util.Map;

/** {@link GlooCollectivesTest} without the argument check: every payload by gloo's own algorithms, as with PyTorch. */
class GlooUncheckedCollectivesTest extends GlooCollectivesTest {

    @Override
    Map<String, String> options() {
        return Map.of(GlooBackend.CHECK_ARGS_OPTION, "false");
    }
}

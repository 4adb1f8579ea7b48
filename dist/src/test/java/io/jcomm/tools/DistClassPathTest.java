package io.jcomm.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.jcomm.tools.run.RunPlan;
import org.junit.jupiter.api.Test;

/**
 * What bin/ promises on the class path of jcomm-dist: commrun's aliases name main classes that are there
 * (the tools artifact depends on neither the demos nor the Llama example, so only this class path can
 * check them), and so are the other launchers' main classes.
 */
class DistClassPathTest {

    @Test
    void commrunsAliasesAndEveryLauncherFindTheirMainClasses() throws Exception {
        assertEquals(RunPlan.DEMO_MAIN, io.jcomm.tools.demo.PipelineDemo.class.getName(), "commrun ... demo");
        assertEquals(RunPlan.MODEL_MAIN, io.jcomm.examples.llama.LlamaDemo.class.getName(), "commrun ... model");
        for (String main : new String[] {"io.jcomm.tools.run.CommRun", "io.jcomm.tools.bench.CommBench",
                "io.jcomm.tools.store.CommStoreCommand", "io.jcomm.tools.top.CommTop"}) {
            Class.forName(main, false, getClass().getClassLoader()).getMethod("main", String[].class);
        }
    }
}

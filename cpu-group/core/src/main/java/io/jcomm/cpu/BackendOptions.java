package io.jcomm.cpu;

import java.util.Map;

/**
 * Typed options of one CPU backend (for example {@link TcpOptions}), given to a group with
 * {@link CpuGroupOptions.Builder#options(BackendOptions)}. An implementation is immutable and has been
 * validated when it exists; {@link #asMap()} is its string form, the same keys and values that
 * {@link CpuGroupOptions.Builder#option(String, String)} accepts, so that typed options and
 * configuration read as text (environment, command line, files) meet in one place.
 */
public interface BackendOptions {

    /** The backend these options belong to ({@code tcp}, {@code gloo}, ...). */
    String backend();

    /**
     * The options that were set, as string keys and values (immutable). Every key is under
     * {@code backend() + "."}; options left unset are absent, so that the backend's defaults apply.
     */
    Map<String, String> asMap();
}

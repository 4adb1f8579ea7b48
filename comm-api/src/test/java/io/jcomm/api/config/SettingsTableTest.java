package io.jcomm.api.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The configuration table is the only place a setting is spelled: {@code docs/CONFIGURATION.md} carries
 * exactly {@link Settings#markdownTable()}, no main source of any module spells a {@code JCOMM_*} variable
 * or a {@code jcomm.*} property (it reads through {@link Settings}), and every such name the launch scripts
 * or the documentation mention is declared.
 *
 * <p>To regenerate the documentation's table after changing {@link Settings}:
 * {@code mvn -pl comm-api test -Dtest=SettingsTableTest -Dsettings.write=true}.
 */
class SettingsTableTest {

    private static final Path ROOT = Path.of("..").toAbsolutePath().normalize();
    private static final Path DOC = ROOT.resolve("docs/CONFIGURATION.md");
    static final String BEGIN = "<!-- settings table: generated from io.jcomm.api.config.Settings -->\n";
    static final String END = "<!-- end of settings table -->\n";
    /** A setting's name in Java source: a string literal that is exactly a variable or property name. */
    private static final Pattern JAVA_LITERAL = Pattern.compile("\"(JCOMM_[A-Z0-9_]+|jcomm\\.[a-z][A-Za-z0-9]*(?:\\.[A-Za-z0-9]+)+)\"");
    /** A variable's name in scripts and prose. */
    private static final Pattern VARIABLE = Pattern.compile("\\bJCOMM_[A-Z0-9_]*[A-Z0-9]\\b");

    @Test
    void documentationCarriesTheTable() throws IOException {
        String doc = Files.readString(DOC, StandardCharsets.UTF_8);
        int b = doc.indexOf(BEGIN);
        int e = doc.indexOf(END);
        assertTrue(b >= 0 && e > b, DOC + " has no generated table between '" + BEGIN.trim() + "' and '" + END.trim() + "'");
        String table = Settings.markdownTable();
        String current = doc.substring(b + BEGIN.length(), e);
        if (!current.equals(table) && Boolean.getBoolean("settings.write")) {
            Files.writeString(DOC, doc.substring(0, b + BEGIN.length()) + table + doc.substring(e), StandardCharsets.UTF_8);
            current = table;
        }
        assertEquals(table, current, "docs/CONFIGURATION.md's table differs from io.jcomm.api.config.Settings; "
                + "regenerate it: mvn -pl comm-api test -Dtest=SettingsTableTest -Dsettings.write=true");
    }

    @Test
    void noMainSourceSpellsASetting() throws IOException {
        List<String> offenders = new ArrayList<>();
        for (Path f : mainSources()) {
            if (f.endsWith(Path.of("io/jcomm/api/config/Settings.java"))) {
                continue;
            }
            List<String> lines = Files.readAllLines(f, StandardCharsets.UTF_8);
            for (int i = 0; i < lines.size(); i++) {
                Matcher m = JAVA_LITERAL.matcher(lines.get(i));
                while (m.find()) {
                    // a class that must not load comm-api may spell a declared setting on a line that names its
                    // declaration (and says why, in a comment)
                    Optional<Setting> declared = Settings.named(m.group(1));
                    boolean excused = declared.isPresent() && (lines.get(i) + (i > 0 ? lines.get(i - 1) : ""))
                            .contains("Settings." + constantOf(declared.get()));
                    if (!excused) {
                        offenders.add(ROOT.relativize(f) + ":" + (i + 1) + " spells " + m.group(1));
                    }
                }
            }
        }
        assertTrue(offenders.isEmpty(), "read settings through io.jcomm.api.config.Settings (declare new ones "
                + "there):\n" + String.join("\n", offenders));
    }

    @Test
    void everyVariableScriptsAndDocsMentionIsDeclared() throws IOException {
        List<Path> files = new ArrayList<>();
        try (Stream<Path> s = Files.list(ROOT.resolve("bin"))) {
            s.filter(Files::isRegularFile).forEach(files::add);
        }
        try (Stream<Path> s = Files.walk(ROOT.resolve("scripts"))) {
            s.filter(p -> p.toString().endsWith(".sh") || p.toString().endsWith(".py")).forEach(files::add);
        }
        try (Stream<Path> s = Files.walk(ROOT.resolve("docs"))) {
            s.filter(p -> p.toString().endsWith(".md")).forEach(files::add);
        }
        try (Stream<Path> s = Files.walk(ROOT.resolve("deploy"), 1)) {
            s.filter(p -> p.toString().endsWith(".yaml") || p.getFileName().toString().equals("Dockerfile")).forEach(files::add);
        }
        files.add(ROOT.resolve("README.md"));
        files.add(ROOT.resolve(".ci/run"));
        TreeSet<String> undeclared = new TreeSet<>();
        for (Path f : files) {
            Matcher m = VARIABLE.matcher(Files.readString(f, StandardCharsets.UTF_8));
            while (m.find()) {
                if (Settings.named(m.group()).isEmpty()) {
                    undeclared.add(m.group() + " (" + ROOT.relativize(f) + ")");
                }
            }
        }
        assertTrue(undeclared.isEmpty(), "declare these in io.jcomm.api.config.Settings: " + undeclared);
    }

    @Test
    void valuesAreTrimmedAndBlankIsUnset() {
        assertEquals(Optional.of("gloo"), Settings.CPU_BACKEND.value(Map.of("JCOMM_CPU_BACKEND", " gloo ")));
        assertEquals(Optional.empty(), Settings.CPU_BACKEND.value(Map.of("JCOMM_CPU_BACKEND", "  ")));
        assertEquals("tcp", Settings.CPU_BACKEND.valueOr(Map.of(), "tcp"));
        Properties p = new Properties();
        p.setProperty("jcomm.receivePool.mib", "64");
        assertEquals(Optional.of("64"), Settings.RECEIVE_POOL_MIB.value(p));
        assertEquals(42, Settings.TIMEOUT_MS.intValue(Map.of("JCOMM_TIMEOUT_MS", "42")).getAsInt());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Settings.TIMEOUT_MS.intValue(Map.of("JCOMM_TIMEOUT_MS", "soon")));
        assertTrue(e.getMessage().contains("JCOMM_TIMEOUT_MS"), e.getMessage());
        assertEquals(Optional.of(true), Settings.LAUNCHER_STORE.flag(Map.of("JCOMM_LAUNCHER_STORE", "YES")));
        assertThrows(IllegalArgumentException.class, () -> Settings.LAUNCHER_STORE.flag(Map.of("JCOMM_LAUNCHER_STORE", "2")));
        assertTrue(Setting.isOff(" OFF") && Setting.isOff("0") && Setting.isOff("false"));
        assertFalse(Setting.isOff("on"));
        assertThrows(IllegalStateException.class, Settings.JAVA_OPTS::fromProcess);
    }

    @Test
    void namesAreUniqueAndDocumented() {
        TreeSet<String> names = new TreeSet<>();
        for (Setting s : Settings.all()) {
            assertTrue(names.add(s.name()), "declared twice: " + s.name());
            assertFalse(s.meaning().isBlank() || s.type().isBlank() || s.defaultText().isBlank() || s.readBy().isBlank(),
                    s.name() + " lacks a column");
            assertFalse((s.meaning() + s.type() + s.defaultText() + s.readBy()).contains("|"),
                    s.name() + ": a '|' would break the Markdown table");
        }
        assertEquals(Settings.all().size(), names.size());
    }

    private static String constantOf(Setting s) {
        try {
            for (java.lang.reflect.Field f : Settings.class.getFields()) {
                if (f.get(null) == s) {
                    return f.getName();
                }
            }
        } catch (IllegalAccessException e) {
            throw new AssertionError(e);
        }
        throw new AssertionError("no constant for " + s);
    }

    private static List<Path> mainSources() throws IOException {
        List<Path> out = new ArrayList<>();
        try (Stream<Path> s = Files.walk(ROOT)) {
            s.filter(p -> p.toString().endsWith(".java"))
                    .filter(p -> p.toString().contains("/src/main/java/"))
                    .filter(p -> !p.toString().contains("/target/") && !p.toString().contains("/node_modules/"))
                    .forEach(out::add);
        }
        assertFalse(out.isEmpty(), "no main sources under " + ROOT);
        return out;
    }
}

package io.jcomm.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * What a newcomer reads first stays short and current: the README fits in {@value #README_MAX_LINES}
 * lines, the README and {@code docs/} name no stretches of work or issue numbers (figures carry dates,
 * commits and commands; history is in git and {@code docs/HISTORY.md}), and every relative link of
 * theirs leads to a file that exists.
 */
class DocsTest {

    static final int README_MAX_LINES = 250;
    private static final Path ROOT = Path.of("..").toAbsolutePath().normalize();
    /** Words of a lab notebook: "session 12", "(session", "issue 14", "issue #14". */
    private static final Pattern HISTORY = Pattern.compile(
            "(?i)\\bsessions? [0-9]+|\\(session\\b|\\bissue #?[0-9]+");
    private static final Pattern LINK = Pattern.compile("\\]\\(([^)#\\s]+)(#[^)\\s]*)?\\)");

    private static List<Path> userDocs() throws IOException {
        List<Path> docs = new ArrayList<>(List.of(ROOT.resolve("README.md")));
        for (Path dir : List.of(ROOT.resolve("docs"), ROOT.resolve("docs/notes"))) {
            try (Stream<Path> s = Files.list(dir)) {
                s.filter(p -> p.toString().endsWith(".md")).sorted().forEach(docs::add);
            }
        }
        return docs;
    }

    @Test
    void theReadmeFitsOnAFewScreens() throws IOException {
        long lines = Files.readAllLines(ROOT.resolve("README.md")).size();
        assertTrue(lines <= README_MAX_LINES, "README.md has " + lines + " lines (at most " + README_MAX_LINES
                + "): move reference material into docs/");
    }

    @Test
    void theDocsCarryNoHistoryWords() throws IOException {
        List<String> hits = new ArrayList<>();
        for (Path doc : userDocs()) {
            List<String> lines = Files.readAllLines(doc);
            for (int i = 0; i < lines.size(); i++) {
                Matcher m = HISTORY.matcher(lines.get(i));
                if (m.find()) {
                    hits.add(ROOT.relativize(doc) + ":" + (i + 1) + ": " + m.group());
                }
            }
        }
        assertEquals(List.of(), hits, "give figures a date, a commit and a command instead");
    }

    @Test
    void everyRelativeLinkLeadsToAFile() throws IOException {
        List<String> broken = new ArrayList<>();
        for (Path doc : userDocs()) {
            Matcher m = LINK.matcher(Files.readString(doc));
            while (m.find()) {
                String target = m.group(1);
                if (target.contains("://") || target.startsWith("mailto:")) {
                    continue;
                }
                if (!Files.exists(doc.getParent().resolve(target).normalize())) {
                    broken.add(ROOT.relativize(doc) + " -> " + target);
                }
            }
        }
        assertEquals(List.of(), broken);
    }
}

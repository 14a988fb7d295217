package gluondyn;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.CodeSource;

/**
 * Finds the JNI library (libgluon_dyn_jni.so): beside the jar that holds these classes, else
 * the copy inside the jar, extracted to a temporary file. It finds the C runtime and MXNet by
 * the paths recorded when it was built, so nothing needs to be set.
 */
final class NativeLibrary {
    static final String NAME = "libgluon_dyn_jni.so";

    private NativeLibrary() {}

    static void load() {
        File beside = besideTheJar();
        if (beside != null && beside.isFile()) {
            System.load(beside.getAbsolutePath());
            return;
        }
        try (InputStream packed = NativeLibrary.class.getResourceAsStream(NAME)) {
            if (packed == null) {
                throw new UnsatisfiedLinkError(NAME + " is neither beside the gluon_dyn jar nor in it");
            }
            Path extracted = Files.createTempFile("gluon_dyn_jni", ".so");
            extracted.toFile().deleteOnExit();
            Files.copy(packed, extracted, StandardCopyOption.REPLACE_EXISTING);
            System.load(extracted.toAbsolutePath().toString());
        } catch (IOException error) {
            throw new UnsatisfiedLinkError("cannot extract " + NAME + " from the gluon_dyn jar: "
                    + error.getMessage());
        }
    }

    private static File besideTheJar() {
        CodeSource source = NativeLibrary.class.getProtectionDomain().getCodeSource();
        if (source == null) {
            return null;
        }
        try {
            File location = new File(source.getLocation().toURI());
            return location.isFile() ? new File(location.getParentFile(), NAME) : null;
        } catch (URISyntaxException | IllegalArgumentException error) {
            return null;  // not a file URI: only the copy inside the jar can be used
        }
    }
}

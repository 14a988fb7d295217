import gluondyn.GluonDynException;
import gluondyn.Model;

/**
 * load_models.c's twin, for the corruption tests: loads each model named through
 * gluondyn.Model and prints one line per prefix, "loaded PREFIX" or "refused PREFIX: MESSAGE"
 * (line breaks in the message made spaces).
 *
 * <p>java LoadModels PREFIX...
 */
public final class LoadModels {
    private LoadModels() {}

    public static void main(String[] args) {
        for (String prefix : args) {
            try {
                Model.load(prefix).close();
                System.out.println("loaded " + prefix);
            } catch (GluonDynException error) {
                String message = error.getMessage().replace('\n', ' ');
                System.out.println("refused " + prefix + ": " + message);
            }
        }
    }
}

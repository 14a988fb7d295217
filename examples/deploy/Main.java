import gluondyn.GluonDynException;
import gluondyn.Model;
import gluondyn.Tensor;

import java.util.Locale;

/**
 * Run the model train_and_export.py exported, from Java, on the inputs it printed outputs for.
 *
 * <pre>
 *   javac -cp build/gluon_dyn.jar -d build/deploy examples/deploy/Main.java
 *   cd build/deploy &amp;&amp; java -cp ../gluon_dyn.jar:. Main model
 * </pre>
 */
public final class Main {
    private static final int FEATURES = 4;
    private static final int BATCH = 2;

    private Main() {}

    public static void main(String[] args) throws GluonDynException {
        int[] lengths = {3, 6, 1};
        int[] tripCounts = {2, 0, 5};
        try (Model model = Model.load(args.length > 0 ? args[0] : "model")) {
            for (int k = 0; k < 3; ++k) {
                float[] seq = new float[lengths[k] * BATCH * FEATURES];
                for (int t = 0; t < lengths[k]; ++t) {
                    for (int b = 0; b < BATCH; ++b) {
                        for (int f = 0; f < FEATURES; ++f) {
                            seq[(t * BATCH + b) * FEATURES + f] =
                                    (float) Math.sin(1.0 + k + 0.7 * t + 0.3 * f + 1.3 * b);
                        }
                    }
                }
                Tensor[] outputs = model.run(new Tensor(seq, lengths[k], BATCH, FEATURES),
                        new Tensor(new float[] {tripCounts[k]}, 1));
                StringBuilder line = new StringBuilder("java example " + k + ":");
                for (float score : outputs[0].data()) {
                    line.append(String.format(Locale.ROOT, " %.5f", score));
                }
                System.out.println(line);
            }
        }
    }
}

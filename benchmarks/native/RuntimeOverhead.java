import gluondyn.GluonDynException;
import gluondyn.Model;
import gluondyn.Tensor;

import java.util.Arrays;
import java.util.Locale;

/**
 * Per-call time of gluondyn.Model.run, for benchmarks/deploy_runtime.py: inputs as
 * runtime_overhead.c takes them ("2x3x4", filled with sin(0.37 k), or "SHAPE=VALUE"); prints
 * "first_output <value>" (output 0's first element) and "java_us <median>" after a warm-up.
 *
 * <p>java -cp gluon_dyn.jar:. RuntimeOverhead PREFIX REPEATS INPUT...
 */
public final class RuntimeOverhead {
    private static final int WARMUP = 200;

    private RuntimeOverhead() {}

    public static void main(String[] args) throws GluonDynException {
        int repeats = Integer.parseInt(args[1]);
        Tensor[] inputs = new Tensor[args.length - 2];
        for (int i = 0; i < inputs.length; ++i) {
            String[] parts = args[i + 2].split("=");
            long[] shape = Arrays.stream(parts[0].split("x")).mapToLong(Long::parseLong).toArray();
            float[] data = new float[(int) Arrays.stream(shape).reduce(1, (a, b) -> a * b)];
            for (int k = 0; k < data.length; ++k) {
                data[k] = parts.length > 1 ? Float.parseFloat(parts[1]) : (float) Math.sin(0.37 * k);
            }
            inputs[i] = new Tensor(data, shape);
        }
        double[] samples = new double[repeats];
        try (Model model = Model.load(args[0])) {
            System.out.printf(Locale.ROOT, "first_output %.6g%n", model.run(inputs)[0].data()[0]);
            for (int r = 0; r < WARMUP + repeats; ++r) {
                long start = System.nanoTime();
                model.run(inputs);
                if (r >= WARMUP) {
                    samples[r - WARMUP] = (System.nanoTime() - start) / 1e3;
                }
            }
        }
        Arrays.sort(samples);
        double median = repeats % 2 == 1 ? samples[repeats / 2]
                : (samples[repeats / 2 - 1] + samples[repeats / 2]) / 2;
        System.out.printf(Locale.ROOT, "java_us %.2f%n", median);
    }
}

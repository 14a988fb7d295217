import gluondyn.GluonDynException;
import gluondyn.Model;
import gluondyn.Tensor;

/**
 * The Java binding's own checks, printed one per line as "<case>: <what happened>":
 * a Tensor whose data does not fit its shape, a checked exception carrying the C runtime's
 * message, a closed model.
 *
 * <p>java JavaApiChecks PREFIX (a model with one input that accepts shape (2, 3))
 */
public final class JavaApiChecks {
    private JavaApiChecks() {}

    public static void main(String[] args) throws GluonDynException {
        try {
            new Tensor(new float[5], 2, 3);
        } catch (IllegalArgumentException error) {
            System.out.println("tensor data does not fit: " + error.getMessage());
        }
        try {
            new Tensor(new float[0], 2, -3);
        } catch (IllegalArgumentException error) {
            System.out.println("tensor negative dim: " + error.getMessage());
        }
        Model model = Model.load(args[0]);
        Tensor good = new Tensor(new float[] {1, 2, 3, 4, 5, 6}, 2, 3);
        System.out.println("outputs: " + model.run(good).length);
        try {
            model.run(good, good);
        } catch (GluonDynException error) {
            System.out.println("two inputs: " + error.getMessage());
        }
        try {
            model.run((Tensor) null);
        } catch (GluonDynException error) {
            System.out.println("null input: " + error.getMessage());
        }
        System.out.println("after failures: " + model.run(good)[0].shape().length);
        System.out.println("report: " + model.report());
        model.close();
        model.close();
        try {
            model.run(good);
        } catch (GluonDynException error) {
            System.out.println("closed: " + error.getMessage());
        }
        try {
            model.report();
        } catch (GluonDynException error) {
            System.out.println("closed report: " + error.getMessage());
        }
    }
}

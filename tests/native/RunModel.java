import gluondyn.GluonDynException;
import gluondyn.Model;
import gluondyn.Tensor;

import java.io.DataOutputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;

/**
 * The Java twin of run_model.c, for the tests: runs an exported model through gluondyn.Model on
 * the calls of a file and writes each call's outputs or error in run_model.c's formats (little
 * endian). Prints "inputs: <names>", then "report: <Model.report()>"; a failed load prints
 * "load failed: <message>" and exits 2.
 *
 * <p>java RunModel PREFIX CALLS RESULTS
 */
public final class RunModel {
    private RunModel() {}

    public static void main(String[] args) throws IOException {
        ByteBuffer calls = ByteBuffer.wrap(Files.readAllBytes(Paths.get(args[1])))
                .order(ByteOrder.LITTLE_ENDIAN);
        try (Model model = Model.load(args[0]);
                DataOutputStream out = new DataOutputStream(new FileOutputStream(args[2]))) {
            System.out.println("inputs: " + String.join(" ", model.inputNames()));
            int count = calls.getInt();
            for (int c = 0; c < count; ++c) {
                Tensor[] inputs = new Tensor[calls.getInt()];
                for (int i = 0; i < inputs.length; ++i) {
                    long[] shape = new long[calls.getInt()];
                    for (int axis = 0; axis < shape.length; ++axis) {
                        shape[axis] = calls.getLong();
                    }
                    float[] data = new float[(int) calls.getLong()];
                    calls.asFloatBuffer().get(data);
                    calls.position(calls.position() + 4 * data.length);
                    inputs[i] = new Tensor(data, shape);
                }
                try {
                    write(out, model.run(inputs));
                } catch (GluonDynException error) {
                    byte[] message = error.getMessage().getBytes(StandardCharsets.UTF_8);
                    out.writeInt(Integer.reverseBytes(-1));
                    out.writeInt(Integer.reverseBytes(message.length));
                    out.write(message);
                }
            }
            System.out.println("report: " + model.report());
        } catch (GluonDynException error) {
            System.out.println("load failed: " + error.getMessage());
            System.exit(2);
        }
    }

    private static void write(DataOutputStream out, Tensor[] outputs) throws IOException {
        out.writeInt(0);
        out.writeInt(Integer.reverseBytes(outputs.length));
        for (Tensor output : outputs) {
            long[] shape = output.shape();
            out.writeInt(Integer.reverseBytes(shape.length));
            for (long dim : shape) {
                out.writeLong(Long.reverseBytes(dim));
            }
            for (float value : output.data()) {
                out.writeInt(Integer.reverseBytes(Float.floatToRawIntBits(value)));
            }
        }
    }
}

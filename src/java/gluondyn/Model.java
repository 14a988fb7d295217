package gluondyn;

/**
 * An exported gluon_dyn model (prefix-symbol.json, prefix-0000.params and, when present,
 * tvm_bridge's prefix-plan.json) run by the C runtime, libgluon_dyn_runtime.so.
 *
 * <p>Inputs take any shape the model accepts, on every call; inputs and outputs are float32.
 * A Model is used by one thread at a time (its methods are synchronized, so concurrent calls
 * wait for each other); different models run in parallel. A failure throws
 * {@link GluonDynException} with the runtime's message and leaves the model usable.
 */
public final class Model implements AutoCloseable {
    static {
        NativeLibrary.load();
    }

    private long handle;
    private final String[] inputNames;
    private final int numOutputs;

    private Model(long handle) {
        this.handle = handle;
        this.inputNames = nativeInputNames(handle);
        this.numOutputs = nativeNumOutputs(handle);
    }

    /**
     * Loads the model exported under {@code prefix}. Each file is checked against the record
     * of checksums export wrote beside it ({@code prefix-checksums.json}) before it is read: a
     * file that is missing from it, truncated or damaged, or a model without the record, throws
     * {@link GluonDynException} naming the file.
     */
    public static Model load(String prefix) throws GluonDynException {
        if (prefix == null) {
            throw new GluonDynException("Model.load: the prefix is null");
        }
        return new Model(nativeLoad(prefix));
    }

    /** The names of the inputs {@link #run} takes, in order (data0, data1, ...). */
    public String[] inputNames() {
        return inputNames.clone();
    }

    /** Runs the model on one tensor per input; returns its outputs. */
    public synchronized Tensor[] run(Tensor... inputs) throws GluonDynException {
        if (handle == 0) {
            throw new GluonDynException("Model.run: the model is closed");
        }
        if (inputs == null) {
            throw new GluonDynException("Model.run: inputs is null");
        }
        float[][] data = new float[inputs.length][];
        long[][] shapes = new long[inputs.length][];
        for (int i = 0; i < inputs.length; ++i) {
            if (inputs[i] == null) {
                throw new GluonDynException("Model.run: input " + i + " is null");
            }
            data[i] = inputs[i].data();
            shapes[i] = inputs[i].shape();
        }
        long[][] outputShapes = new long[numOutputs][];
        float[][] outputData = nativeRun(handle, data, shapes, outputShapes);
        Tensor[] outputs = new Tensor[numOutputs];
        for (int i = 0; i < numOutputs; ++i) {
            outputs[i] = new Tensor(outputData[i], outputShapes[i]);
        }
        return outputs;
    }

    /**
     * How the runs went, for diagnosis: how many ran as a tvm_bridge plan and how many as the
     * MXNet graph (their types differed from the plan's), with the last difference.
     */
    public synchronized String report() throws GluonDynException {
        if (handle == 0) {
            throw new GluonDynException("Model.report: the model is closed");
        }
        return nativeReport(handle);
    }

    /** Releases the model; later calls to run fail. Closing again does nothing. */
    @Override
    public synchronized void close() {
        if (handle != 0) {
            nativeFree(handle);
            handle = 0;
        }
    }

    private static native long nativeLoad(String prefix) throws GluonDynException;

    private static native String[] nativeInputNames(long handle);

    private static native int nativeNumOutputs(long handle);

    private static native float[][] nativeRun(long handle, float[][] data, long[][] shapes,
            long[][] outputShapes) throws GluonDynException;

    private static native String nativeReport(long handle);

    private static native void nativeFree(long handle);
}

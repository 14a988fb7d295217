package gluondyn;

import java.util.Arrays;

/** A float32 array: its elements in row-major order and its shape. */
public final class Tensor {
    private final float[] data;
    private final long[] shape;

    /**
     * @param data the elements in row-major order (held, not copied)
     * @param shape the sizes of the dimensions; their product is data.length
     */
    public Tensor(float[] data, long... shape) {
        if (data == null || shape == null) {
            throw new IllegalArgumentException("a Tensor needs data and a shape, got null");
        }
        long elements = 1;
        for (long dim : shape) {
            if (dim < 0) {
                throw new IllegalArgumentException("shape " + Arrays.toString(shape)
                        + " has a negative dimension");
            }
            elements = Math.multiplyExact(elements, dim);
        }
        if (elements != data.length) {
            throw new IllegalArgumentException("shape " + Arrays.toString(shape) + " does not hold "
                    + data.length + " elements");
        }
        this.data = data;
        this.shape = shape.clone();
    }

    /** The elements, in row-major order (the array the tensor holds, not a copy). */
    public float[] data() {
        return data;
    }

    /** The shape (a copy). */
    public long[] shape() {
        return shape.clone();
    }

    @Override
    public String toString() {
        return "Tensor" + Arrays.toString(shape);
    }
}

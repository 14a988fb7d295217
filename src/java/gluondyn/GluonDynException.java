package gluondyn;

/** A failure of the gluon_dyn runtime: its message is the C runtime's (gd_last_error). */
public class GluonDynException extends Exception {
    private static final long serialVersionUID = 1L;

    public GluonDynException(String message) {
        super(message);
    }
}

/* JNI functions of gluondyn.Model over the C runtime (gluon_dyn_runtime.h). */
#include <jni.h>
#include <stdint.h>
#include <stdlib.h>

#include "gluon_dyn_runtime.h"

static void throw_runtime_error(JNIEnv *env, const char *message) {
  jclass type = (*env)->FindClass(env, "gluondyn/GluonDynException");
  if (type != NULL) (*env)->ThrowNew(env, type, message);
}

JNIEXPORT jlong JNICALL Java_gluondyn_Model_nativeLoad(JNIEnv *env, jclass cls, jstring prefix) {
  const char *path = (*env)->GetStringUTFChars(env, prefix, NULL);
  gd_model *model;
  (void)cls;
  if (path == NULL) return 0; /* OutOfMemoryError pending */
  model = gd_model_load(path);
  (*env)->ReleaseStringUTFChars(env, prefix, path);
  if (model == NULL) throw_runtime_error(env, gd_last_error());
  return (jlong)(intptr_t)model;
}

JNIEXPORT jobjectArray JNICALL Java_gluondyn_Model_nativeInputNames(JNIEnv *env, jclass cls,
                                                                    jlong handle) {
  gd_model *model = (gd_model *)(intptr_t)handle;
  int count = gd_model_num_inputs(model), i;
  jobjectArray names =
      (*env)->NewObjectArray(env, count, (*env)->FindClass(env, "java/lang/String"), NULL);
  (void)cls;
  for (i = 0; names != NULL && i < count; ++i) {
    jstring name = (*env)->NewStringUTF(env, gd_model_input_name(model, i));
    if (name == NULL) return NULL;
    (*env)->SetObjectArrayElement(env, names, i, name);
    (*env)->DeleteLocalRef(env, name);
  }
  return names;
}

JNIEXPORT jint JNICALL Java_gluondyn_Model_nativeNumOutputs(JNIEnv *env, jclass cls,
                                                           jlong handle) {
  (void)env;
  (void)cls;
  return gd_model_num_outputs((gd_model *)(intptr_t)handle);
}

/* Output k of the last run as a new Java array, its shape into output_shapes[k]; 0 when out of
   memory (an OutOfMemoryError is then pending). */
static int copy_output(JNIEnv *env, gd_model *model, int k, jobjectArray outputs,
                       jobjectArray output_shapes) {
  int ndim = gd_model_output_ndim(model, k), axis;
  const int64_t *shape = gd_model_output_shape(model, k);
  jsize elements = 1;
  jfloatArray values;
  jlongArray dims = (*env)->NewLongArray(env, ndim);
  for (axis = 0; axis < ndim; ++axis) elements *= (jsize)shape[axis];
  values = (*env)->NewFloatArray(env, elements);
  if (values == NULL || dims == NULL) return 0;
  (*env)->SetFloatArrayRegion(env, values, 0, elements, gd_model_output_data(model, k));
  (*env)->SetLongArrayRegion(env, dims, 0, ndim, (const jlong *)shape);
  (*env)->SetObjectArrayElement(env, outputs, k, values);
  (*env)->SetObjectArrayElement(env, output_shapes, k, dims);
  (*env)->DeleteLocalRef(env, values);
  (*env)->DeleteLocalRef(env, dims);
  return 1;
}

/* The inputs' elements are copied out of the Java arrays (the GC may move those while the
   model runs); the outputs are copied into new Java arrays. */
JNIEXPORT jobjectArray JNICALL Java_gluondyn_Model_nativeRun(JNIEnv *env, jclass cls, jlong handle,
                                                             jobjectArray data, jobjectArray shapes,
                                                             jobjectArray output_shapes) {
  gd_model *model = (gd_model *)(intptr_t)handle;
  jsize count = (*env)->GetArrayLength(env, data), i;
  float **inputs = calloc((size_t)count + 1, sizeof(float *));
  int64_t **dims = calloc((size_t)count + 1, sizeof(int64_t *));
  int *ndims = calloc((size_t)count + 1, sizeof(int));
  jobjectArray outputs = NULL;
  int copied = inputs != NULL && dims != NULL && ndims != NULL, k;
  (void)cls;
  for (i = 0; copied && i < count; ++i) {
    jfloatArray values = (jfloatArray)(*env)->GetObjectArrayElement(env, data, i);
    jlongArray shape = (jlongArray)(*env)->GetObjectArrayElement(env, shapes, i);
    jsize size = (*env)->GetArrayLength(env, values);
    ndims[i] = (int)(*env)->GetArrayLength(env, shape);
    inputs[i] = malloc(size > 0 ? (size_t)size * sizeof(float) : 1);
    dims[i] = malloc(ndims[i] > 0 ? (size_t)ndims[i] * sizeof(int64_t) : 1);
    copied = inputs[i] != NULL && dims[i] != NULL;
    if (copied) {
      (*env)->GetFloatArrayRegion(env, values, 0, size, inputs[i]);
      (*env)->GetLongArrayRegion(env, shape, 0, ndims[i], (jlong *)dims[i]);
    }
    (*env)->DeleteLocalRef(env, values);
    (*env)->DeleteLocalRef(env, shape);
  }
  if (!copied) {
    throw_runtime_error(env, "Model.run: out of memory for a copy of the inputs");
  } else if (gd_model_run(model, (int)count, (const float *const *)inputs, ndims,
                          (const int64_t *const *)dims) != 0) {
    throw_runtime_error(env, gd_last_error());
  } else {
    outputs = (*env)->NewObjectArray(env, gd_model_num_outputs(model),
                                     (*env)->FindClass(env, "[F"), NULL);
    for (k = 0; outputs != NULL && k < gd_model_num_outputs(model); ++k) {
      if (!copy_output(env, model, k, outputs, output_shapes)) outputs = NULL;
    }
  }
  for (i = 0; i < count; ++i) {
    if (inputs) free(inputs[i]);
    if (dims) free(dims[i]);
  }
  free(inputs);
  free(dims);
  free(ndims);
  return outputs;
}

JNIEXPORT jstring JNICALL Java_gluondyn_Model_nativeReport(JNIEnv *env, jclass cls,
                                                          jlong handle) {
  (void)cls;
  return (*env)->NewStringUTF(env, gd_model_report((gd_model *)(intptr_t)handle));
}

JNIEXPORT void JNICALL Java_gluondyn_Model_nativeFree(JNIEnv *env, jclass cls, jlong handle) {
  (void)env;
  (void)cls;
  gd_model_free((gd_model *)(intptr_t)handle);
}

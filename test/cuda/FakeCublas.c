/* A stand-in for libcublas.so in tests of nimble-run's cuBLAS calls on
 * machines without a GPU (test/cuda/cuda-runtime.test), paired with
 * FakeCudaDriver.c, whose "device memory" is host memory: the GEMMs are
 * computed here, column-major as cuBLAS defines them (a plain triple loop
 * in double), so a wrong transpose, leading dimension or stride in the
 * runtime's mapping of row-major products shows in the results. Arguments
 * cuBLAS would reject (a leading dimension below the rows of its operand,
 * negative sizes) fail with CUBLAS_STATUS_INVALID_VALUE (7). Each call
 * appends one line to FAKE_CUDA_TRACE; FAKE_CUBLAS_FAIL=<status> makes every
 * GEMM return that status (13: CUBLAS_STATUS_EXECUTION_FAILED). */
#include <stdio.h>
#include <stdlib.h>

static int theHandle;

static void trace(const char *what, int ta, int tb, int m, int n, int k, int lda, int ldb, int ldc, long long sa,
                  long long sb, long long sc, int batch) {
  const char *path = getenv("FAKE_CUDA_TRACE");
  if (!path || !*path) return;
  FILE *f = fopen(path, "a");
  if (!f) return;
  fprintf(f, "%s %c%c m=%d n=%d k=%d lda=%d ldb=%d ldc=%d", what, ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, lda, ldb,
          ldc);
  if (batch >= 0) fprintf(f, " strides=%lld,%lld,%lld batch=%d", sa, sb, sc, batch);
  fprintf(f, "\n");
  fclose(f);
}

int cublasCreate_v2(void **h) { *h = &theHandle; return 0; }
int cublasDestroy_v2(void *h) { return h == &theHandle ? 0 : 1; }
int cublasSetStream_v2(void *h, void *s) { (void)s; return h == &theHandle ? 0 : 1; }
const char *cublasGetStatusName(int s) {
  switch (s) {
  case 0: return "CUBLAS_STATUS_SUCCESS";
  case 7: return "CUBLAS_STATUS_INVALID_VALUE";
  case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
  default: return "CUBLAS_STATUS_UNKNOWN";
  }
}

static int check(void *h, int ta, int tb, int m, int n, int k, int lda, int ldb, int ldc) {
  if (h != &theHandle) return 1;
  if (m < 0 || n < 0 || k < 0 || (ta != 0 && ta != 1) || (tb != 0 && tb != 1)) return 7;
  if (lda < (ta ? k : m) || lda < 1 || ldb < (tb ? n : k) || ldb < 1 || ldc < m || ldc < 1) return 7;
  const char *fail = getenv("FAKE_CUBLAS_FAIL");
  return fail && *fail ? atoi(fail) : 0;
}

static void gemm(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda, const float *b, int ldb,
                 float beta, float *c, int ldc) {
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double s = 0;
      for (int l = 0; l < k; ++l) {
        double x = ta ? a[l + (long long)i * lda] : a[i + (long long)l * lda];
        double y = tb ? b[j + (long long)l * ldb] : b[l + (long long)j * ldb];
        s += x * y;
      }
      float *out = &c[i + (long long)j * ldc];
      *out = (float)(alpha * s + (beta == 0 ? 0.0 : beta * *out));
    }
}

int cublasSgemm_v2(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a, int lda,
                   const float *b, int ldb, const float *beta, float *c, int ldc) {
  trace("cublasSgemm", ta, tb, m, n, k, lda, ldb, ldc, 0, 0, 0, -1);
  int st = check(h, ta, tb, m, n, k, lda, ldb, ldc);
  if (st) return st;
  gemm(ta, tb, m, n, k, *alpha, a, lda, b, ldb, *beta, c, ldc);
  return 0;
}

int cublasSgemmStridedBatched(void *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *a,
                              int lda, long long sa, const float *b, int ldb, long long sb, const float *beta,
                              float *c, int ldc, long long sc, int batch) {
  trace("cublasSgemmStridedBatched", ta, tb, m, n, k, lda, ldb, ldc, sa, sb, sc, batch);
  int st = check(h, ta, tb, m, n, k, lda, ldb, ldc);
  if (st) return st;
  if (batch < 0 || sa < 0 || sb < 0 || sc < 0) return 7;
  for (int i = 0; i < batch; ++i)
    gemm(ta, tb, m, n, k, *alpha, a + i * sa, lda, b + i * sb, ldb, *beta, c + i * sc, ldc);
  return 0;
}

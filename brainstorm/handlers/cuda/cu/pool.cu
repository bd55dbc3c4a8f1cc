/* Max and average pooling, forward and backward (gathers, no atomics);
   the image geometry as in conv.cu. */
/* The outputs (i, j) whose window covers input row y: i in [*lo, *hi]. */
__device__ void bs_covering(int y, int pad, int k, int s, int out_len,
                            int* lo, int* hi)
{
    int first = y + pad - k + 1;
    *lo = (first <= 0) ? 0 : (first + s - 1) / s;
    int last = (y + pad) / s;
    *hi = (last < out_len - 1) ? last : out_len - 1;
}

/* Number of in-bounds cells of window position i along one axis. */
__device__ int bs_inside(int i, int pad, int k, int s, int len)
{
    int start = i * s - pad;
    int stop = start + k;
    if (start < 0) start = 0;
    if (stop > len) stop = len;
    return (stop > start) ? stop - start : 0;
}

/* One thread per output (n, i, j, c): the first maximum (row-major window
   order) over the in-bounds cells and its flat in-image index
   (row * W + col) * C + c; output 0 and argmax -1 for a window of padding
   only. */
extern "C" __global__ void maxpool_forward(
    int total, int H, int W, int C, int OH, int OW, int KH, int KW, int pad_y, int pad_x, int sy, int sx, const float* x, int x0, int x1, int x2, int x3,
    float* y, int y0, int y1, int y2, int y3, float* am, int a0, int a1,
    int a2, int a3)
{
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += blockDim.x * gridDim.x) {
        int c = e % C;
        int t = e / C;
        int j = t % OW;
        t /= OW;
        int i = t % OH;
        int n = t / OH;
        float best = 0.0f;
        float arg = -1.0f;
        int found = 0;
        for (int u = 0; u < KH; ++u) {
            int r = i * sy - pad_y + u;
            if (r < 0 || r >= H) continue;
            for (int v = 0; v < KW; ++v) {
                int q = j * sx - pad_x + v;
                if (q < 0 || q >= W) continue;
                float value = x[(long long)n * x0 + (long long)r * x1 +
                                (long long)q * x2 + (long long)c * x3];
                /* a NaN is the maximum (the first one wins), as on the CPU */
                if (!found || value > best || (isnan(value) && !isnan(best))) {
                    best = value;
                    arg = (float)((r * W + q) * C + c);
                    found = 1;
                }
            }
        }
        y[(long long)n * y0 + (long long)i * y1 + (long long)j * y2 +
          (long long)c * y3] = best;
        am[(long long)n * a0 + (long long)i * a1 + (long long)j * a2 +
           (long long)c * a3] = arg;
    }
}

/* One thread per input cell (n, y, x, c): ADD the deltas of all outputs
   whose argmax is this cell (a gather, so no atomics). */
extern "C" __global__ void maxpool_backward_add(
    int total, int H, int W, int C, int OH, int OW, int KH, int KW, int pad_y, int pad_x, int sy, int sx, const float* am, int a0, int a1, int a2, int a3,
    const float* dy, int g0, int g1, int g2, int g3, float* dx, int d0,
    int d1, int d2, int d3)
{
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += blockDim.x * gridDim.x) {
        int c = e % C;
        int t = e / C;
        int xx = t % W;
        t /= W;
        int y = t % H;
        int n = t / H;
        float me = (float)((y * W + xx) * C + c);
        int i_lo, i_hi, j_lo, j_hi;
        bs_covering(y, pad_y, KH, sy, OH, &i_lo, &i_hi);
        bs_covering(xx, pad_x, KW, sx, OW, &j_lo, &j_hi);
        float acc = 0.0f;
        for (int i = i_lo; i <= i_hi; ++i) {
            for (int j = j_lo; j <= j_hi; ++j) {
                long long o = (long long)n * a0 + (long long)i * a1 +
                              (long long)j * a2 + (long long)c * a3;
                if (am[o] == me) {
                    acc += dy[(long long)n * g0 + (long long)i * g1 +
                              (long long)j * g2 + (long long)c * g3];
                }
            }
        }
        dx[(long long)n * d0 + (long long)y * d1 + (long long)xx * d2 +
           (long long)c * d3] += acc;
    }
}

/* One thread per output: the mean over the in-bounds cells (0 if none). */
extern "C" __global__ void avgpool_forward(
    int total, int H, int W, int C, int OH, int OW, int KH, int KW, int pad_y, int pad_x, int sy, int sx, const float* x, int x0, int x1, int x2, int x3,
    float* y, int y0, int y1, int y2, int y3)
{
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += blockDim.x * gridDim.x) {
        int c = e % C;
        int t = e / C;
        int j = t % OW;
        t /= OW;
        int i = t % OH;
        int n = t / OH;
        float acc = 0.0f;
        for (int u = 0; u < KH; ++u) {
            int r = i * sy - pad_y + u;
            if (r < 0 || r >= H) continue;
            for (int v = 0; v < KW; ++v) {
                int q = j * sx - pad_x + v;
                if (q < 0 || q >= W) continue;
                acc += x[(long long)n * x0 + (long long)r * x1 +
                         (long long)q * x2 + (long long)c * x3];
            }
        }
        int count = bs_inside(i, pad_y, KH, sy, H) * bs_inside(j, pad_x, KW, sx, W);
        y[(long long)n * y0 + (long long)i * y1 + (long long)j * y2 +
          (long long)c * y3] = (count > 0) ? acc / (float)count : 0.0f;
    }
}

/* One thread per input cell: ADD delta / count of every covering window. */
extern "C" __global__ void avgpool_backward_add(
    int total, int H, int W, int C, int OH, int OW, int KH, int KW, int pad_y, int pad_x, int sy, int sx, const float* dy, int g0, int g1, int g2, int g3,
    float* dx, int d0, int d1, int d2, int d3)
{
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += blockDim.x * gridDim.x) {
        int c = e % C;
        int t = e / C;
        int xx = t % W;
        t /= W;
        int y = t % H;
        int n = t / H;
        int i_lo, i_hi, j_lo, j_hi;
        bs_covering(y, pad_y, KH, sy, OH, &i_lo, &i_hi);
        bs_covering(xx, pad_x, KW, sx, OW, &j_lo, &j_hi);
        float acc = 0.0f;
        for (int i = i_lo; i <= i_hi; ++i) {
            int rows = bs_inside(i, pad_y, KH, sy, H);
            for (int j = j_lo; j <= j_hi; ++j) {
                int count = rows * bs_inside(j, pad_x, KW, sx, W);
                acc += dy[(long long)n * g0 + (long long)i * g1 +
                          (long long)j * g2 + (long long)c * g3] /
                       (float)count;
            }
        }
        dx[(long long)n * d0 + (long long)y * d1 + (long long)xx * d2 +
           (long long)c * d3] += acc;
    }
}

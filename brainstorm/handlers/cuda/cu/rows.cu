/* Row-wise kernels: one-hot, picking one entry per row, softmax. */
/* Row-wise softmax of a rows x cols matrix: one block per row (grid-stride
   over rows), blockDim.x a power of two <= 256. Three sweeps over the row:
   maximum, sum of exp(x - max), then the output. Each output element is
   written by the thread that read it last, so out may alias m. */
extern "C" __global__ void softmax_rows(
    int rows, int cols, const float* m, int m_r, int m_c, float* out,
    int o_r, int o_c)
{
    __shared__ float buf[256];
    const int t = threadIdx.x;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* mr = m + (long long)r * m_r;
        float* orow = out + (long long)r * o_r;
        float best = -__int_as_float(0x7f800000);
        for (int c = t; c < cols; c += blockDim.x) {
            best = fmaxf(best, mr[(long long)c * m_c]);
        }
        buf[t] = best;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) {
            if (t < s) {
                buf[t] = fmaxf(buf[t], buf[t + s]);
            }
            __syncthreads();
        }
        best = buf[0];
        __syncthreads();
        float total = 0.0f;
        for (int c = t; c < cols; c += blockDim.x) {
            total += expf(mr[(long long)c * m_c] - best);
        }
        buf[t] = total;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) {
            if (t < s) {
                buf[t] += buf[t + s];
            }
            __syncthreads();
        }
        total = buf[0];
        __syncthreads();
        for (int c = t; c < cols; c += blockDim.x) {
            orow[(long long)c * o_c] =
                expf(mr[(long long)c * m_c] - best) / total;
        }
    }
}

/* One-hot: out[r, c] = (v[r] == c) for the total = rows * cols elements
   of a rows x cols out. */
extern "C" __global__ void binarize_rows(
    int total, int cols, const float* v, int v_r, float* out, int o_r,
    int o_c)
{
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += blockDim.x * gridDim.x) {
        int r = e / cols;
        int c = e % cols;
        out[(long long)r * o_r + (long long)c * o_c] =
            (v[(long long)r * v_r] == (float)c) ? 1.0f : 0.0f;
    }
}

/* out[r] = m[r, (int)v[r]]; an id outside [0, cols) gives NaN instead of
   reading outside the matrix. */
extern "C" __global__ void index_rows(
    int rows, int cols, const float* m, int m_r, int m_c, const float* v,
    int v_r, float* out, int o_r)
{
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows;
         r += blockDim.x * gridDim.x) {
        float id = v[(long long)r * v_r];
        int c = (int)id;
        float value = __int_as_float(0x7fc00000);
        if (id >= 0.0f && c < cols) {
            value = m[(long long)r * m_r + (long long)c * m_c];
        }
        out[(long long)r * o_r] = value;
    }
}

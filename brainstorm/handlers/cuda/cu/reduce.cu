/* Reductions: column sums and the two passes of a full sum (or count of
   non-finite elements). */
#define BS_TILE_X 32
#define BS_TILE_Y 8

/* out[j * o_c] = sum_i a[i * a_r + j * a_c] for j < cols: column sums of a
   rows x cols matrix (any strides). Block (32, 8): threadIdx.x picks the
   column, threadIdx.y a group of rows; the 8 partial sums of a column are
   added in shared memory. No atomics, so the result is deterministic. */
extern "C" __global__ void sum_columns(
    int rows, int cols, const float* a, int a_r, int a_c, float* out,
    int o_c)
{
    __shared__ float part[BS_TILE_Y][BS_TILE_X + 1];
    for (int j0 = blockIdx.x * BS_TILE_X; j0 < cols;
         j0 += gridDim.x * BS_TILE_X) {
        int j = j0 + threadIdx.x;
        float acc = 0.0f;
        if (j < cols) {
            for (int i = threadIdx.y; i < rows; i += BS_TILE_Y) {
                acc += a[(long long)i * a_r + (long long)j * a_c];
            }
        }
        part[threadIdx.y][threadIdx.x] = acc;
        __syncthreads();
        if (threadIdx.y == 0 && j < cols) {
            float total = 0.0f;
            for (int k = 0; k < BS_TILE_Y; ++k) {
                total += part[k][threadIdx.x];
            }
            out[(long long)j * o_c] = total;
        }
        __syncthreads();
    }
}

/* First pass of a full reduction over a strided 4-D operand (see the module
   docstring): block b writes the sum of its grid-stride share to
   partial[b]. With count_nonfinite != 0 it counts NaN/Inf elements
   instead. blockDim.x must be a power of two <= 256. */
extern "C" __global__ void sum_all_partial(
    int n, int d1, int d2, int d3, const float* p_a, int a_0, int a_1,
    int a_2, int a_3, float* partial, int count_nonfinite)
{
    __shared__ float buf[256];
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += blockDim.x * gridDim.x) {
        int i3 = i % d3;
        int r_ = i / d3;
        int i2 = r_ % d2;
        r_ /= d2;
        int i1 = r_ % d1;
        int i0 = r_ / d1;
        float x = p_a[(long long)i0 * a_0 + (long long)i1 * a_1 + (long long)i2 * a_2 + (long long)i3 * a_3];
        if (count_nonfinite) {
            acc += isfinite(x) ? 0.0f : 1.0f;
        } else {
            acc += x;
        }
    }
    buf[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            buf[threadIdx.x] += buf[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = buf[0];
    }
}

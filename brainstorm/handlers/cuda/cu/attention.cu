/* Attention kernels: batched matrix products over the middle axes, the
   masked softmax of attention scores and the softmax deltas. One thread
   per output element (batch_dot) or per row (the softmax kernels), with
   grid-stride loops; every operand comes with its element strides. */

/* out[r, i1, i2, c] (+)= sum_k a[r, i1, i2, k] * b[k, i1, i2, c] for the
   total = rows * n1 * n2 * cols elements of out. The strides name the
   matrix axes as used (a_r: rows of op(a), a_k: its inner axis), so a
   transposed operand is the same operand with its strides swapped. */
extern "C" __global__ void batch_dot(
    int total, int n1, int n2, int cols, int inner, int accumulate,
    const float* a, int a_r, int a_1, int a_2, int a_k,
    const float* b, int b_k, int b_1, int b_2, int b_c,
    float* out, int o_r, int o_1, int o_2, int o_c)
{
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += blockDim.x * gridDim.x) {
        int c = e % cols;
        int rest = e / cols;
        int i2 = rest % n2;
        rest /= n2;
        int i1 = rest % n1;
        int r = rest / n1;
        const float* pa = a + (long long)r * a_r + (long long)i1 * a_1
            + (long long)i2 * a_2;
        const float* pb = b + (long long)c * b_c + (long long)i1 * b_1
            + (long long)i2 * b_2;
        float acc = 0.0f;
        for (int k = 0; k < inner; ++k) {
            acc += pa[(long long)k * a_k] * pb[(long long)k * b_k];
        }
        float* po = out + (long long)r * o_r + (long long)i1 * o_1
            + (long long)i2 * o_2 + (long long)c * o_c;
        *po = accumulate ? *po + acc : acc;
    }
}

/* Masked softmax over the last axis of x (T, B, H, S) for the total =
   T * B * H rows: key s takes part if the mask marks it real (has_mask
   == 0: every position is) and, if causal, s <= t; a padding query row
   and a row without keys get zeros. out may alias x: each element is
   read before it is written, by the same thread. */
extern "C" __global__ void masked_softmax_rows(
    int total, int batch, int heads, int cols, int causal, int has_mask,
    const float* x, int x_t, int x_b, int x_h, int x_s,
    const float* mask, int m_t, int m_b,
    float* out, int o_t, int o_b, int o_h, int o_s)
{
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += blockDim.x * gridDim.x) {
        int h = e % heads;
        int rest = e / heads;
        int bb = rest % batch;
        int t = rest / batch;
        const float* px = x + (long long)t * x_t + (long long)bb * x_b
            + (long long)h * x_h;
        float* po = out + (long long)t * o_t + (long long)bb * o_b
            + (long long)h * o_h;
        int row_real = !has_mask || mask[(long long)t * m_t + (long long)bb * m_b] != 0.0f;
        int last = causal ? (t < cols - 1 ? t : cols - 1) : cols - 1;
        if (!row_real) {
            last = -1;
        }
        float best = -__int_as_float(0x7f800000);
        for (int s = 0; s <= last; ++s) {
            if (!has_mask || mask[(long long)s * m_t + (long long)bb * m_b] != 0.0f) {
                best = fmaxf(best, px[(long long)s * x_s]);
            }
        }
        float sum = 0.0f;
        for (int s = 0; s <= last; ++s) {
            if (!has_mask || mask[(long long)s * m_t + (long long)bb * m_b] != 0.0f) {
                sum += expf(px[(long long)s * x_s] - best);
            }
        }
        for (int s = 0; s < cols; ++s) {
            float value = 0.0f;
            if (s <= last
                && (!has_mask
                    || mask[(long long)s * m_t + (long long)bb * m_b] != 0.0f)) {
                value = expf(px[(long long)s * x_s] - best) / sum;
            }
            po[(long long)s * o_s] = value;
        }
    }
}

/* dx = y * (dy - sum(dy * y)) over the last axis, for the total =
   n0 * n1 * n2 rows. dx may alias dy (each element is read before it is
   written, by the same thread). */
extern "C" __global__ void softmax_deriv_rows(
    int total, int n1, int n2, int cols,
    const float* y, int y_0, int y_1, int y_2, int y_c,
    const float* dy, int d_0, int d_1, int d_2, int d_c,
    float* dx, int x_0, int x_1, int x_2, int x_c)
{
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += blockDim.x * gridDim.x) {
        int i2 = e % n2;
        int rest = e / n2;
        int i1 = rest % n1;
        int i0 = rest / n1;
        const float* py = y + (long long)i0 * y_0 + (long long)i1 * y_1
            + (long long)i2 * y_2;
        const float* pd = dy + (long long)i0 * d_0 + (long long)i1 * d_1
            + (long long)i2 * d_2;
        float* px = dx + (long long)i0 * x_0 + (long long)i1 * x_1
            + (long long)i2 * x_2;
        float sum = 0.0f;
        for (int c = 0; c < cols; ++c) {
            sum += py[(long long)c * y_c] * pd[(long long)c * d_c];
        }
        for (int c = 0; c < cols; ++c) {
            float yc = py[(long long)c * y_c];
            px[(long long)c * x_c] = yc * (pd[(long long)c * d_c] - sum);
        }
    }
}

/* Per-sequence time reversal (Handler.reverse_time_t): one thread per
   element (t, b, f) of the (T, B, F) operands. A sequence's length is its
   number of non-zero mask entries (T without a mask: has_mask == 0). */
extern "C" __global__ void reverse_time(
    int total, int T, int B, int F, const float* a, int a0, int a1, int a2,
    const float* mask, int m0, int m1, int has_mask, float* out, int o0,
    int o1, int o2)
{
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += blockDim.x * gridDim.x) {
        int f = e % F;
        int r = e / F;
        int b = r % B;
        int t = r / B;
        int len = T;
        if (has_mask) {
            len = 0;
            for (int s = 0; s < T; ++s) {
                len += mask[(long long)s * m0 + (long long)b * m1] != 0.0f;
            }
        }
        int src = (t < len) ? len - 1 - t : t;
        out[(long long)t * o0 + (long long)b * o1 + (long long)f * o2] =
            a[(long long)src * a0 + (long long)b * a1 + (long long)f * a2];
    }
}

/* Embedding kernels: picking table rows by id and adding rows back. */
/* out[r, c] = m[(int)v[r], c] for the total = rows * cols elements of a
   rows x cols out; an id outside [0, ids) gives NaN instead of reading
   outside the table. */
extern "C" __global__ void gather_rows(
    int total, int cols, int ids, const float* m, int m_r, int m_c,
    const float* v, int v_r, float* out, int o_r, int o_c)
{
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += blockDim.x * gridDim.x) {
        int r = e / cols;
        int c = e % cols;
        float id = v[(long long)r * v_r];
        int k = (int)id;
        float value = __int_as_float(0x7fc00000);
        if (id >= 0.0f && k < ids) {
            value = m[(long long)k * m_r + (long long)c * m_c];
        }
        out[(long long)r * o_r + (long long)c * o_c] = value;
    }
}

/* out[(int)v[r], c] += m[r, c] for the total = rows * cols elements of a
   rows x cols m, atomically (rows may share an id); an id outside
   [0, ids) adds nothing. */
extern "C" __global__ void scatter_add_rows(
    int total, int cols, int ids, const float* m, int m_r, int m_c,
    const float* v, int v_r, float* out, int o_r, int o_c)
{
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += blockDim.x * gridDim.x) {
        int r = e / cols;
        int c = e % cols;
        float id = v[(long long)r * v_r];
        int k = (int)id;
        if (id >= 0.0f && k < ids) {
            atomicAdd(out + (long long)k * o_r + (long long)c * o_c,
                      m[(long long)r * m_r + (long long)c * m_c]);
        }
    }
}

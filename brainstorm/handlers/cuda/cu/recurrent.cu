/* The LSTM time step as one pass (the ops lstm_forward_step and
   lstm_backward_step): one thread per (row b, cell s) of a (B, S) step.
   Every operand is a matrix with unit column stride and its own row stride
   (``*_r``); the (B, 4*S) ones hold the gates [Z | I | F | O] side by side.
   ``act`` selects g = h: 0 linear, 1 rel, 2 sigmoid, 3 tanh, 4 el, with
   the formulas of the elementwise activation kernels. */
__device__ float bs_sigmoid(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

__device__ float bs_activation(int act, float x)
{
    switch (act) {
    case 1: return (x > 0.0f) ? x : 0.0f;
    case 2: return bs_sigmoid(x);
    case 3: return tanhf(x);
    case 4: return (x > 0.0f) ? x : expm1f(x);
    default: return x;
    }
}

extern "C" __global__ void lstm_forward_step(
    int n, int S, int act, float* g, int g_r, const float* cp, int cp_r,
    const float* pi, const float* pf, const float* po, float* h, int h_r,
    float* c, int c_r, float* co, int co_r, float* y, int y_r)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += blockDim.x * gridDim.x) {
        const int b = i / S;
        const int s = i - b * S;
        float* gb = g + (long long)b * g_r;
        float* hb = h + (long long)b * h_r;
        const float c_prev = cp[(long long)b * cp_r + s];
        const float ia = gb[S + s] + c_prev * pi[s];
        const float fa = gb[2 * S + s] + c_prev * pf[s];
        gb[S + s] = ia;
        gb[2 * S + s] = fa;
        const float zb = bs_activation(act, gb[s]);
        const float ib = bs_sigmoid(ia);
        const float fb = bs_sigmoid(fa);
        const float cell = ib * zb + fb * c_prev;
        const float oa = gb[3 * S + s] + cell * po[s];
        gb[3 * S + s] = oa;
        const float ob = bs_sigmoid(oa);
        const float cell_out = bs_activation(act, cell);
        hb[s] = zb;
        hb[S + s] = ib;
        hb[2 * S + s] = fb;
        hb[3 * S + s] = ob;
        c[(long long)b * c_r + s] = cell;
        co[(long long)b * co_r + s] = cell_out;
        y[(long long)b * y_r + s] = ob * cell_out;
    }
}

extern "C" __global__ void lstm_backward_step(
    int n, int S, const float* dy, int dy_r, const float* f, int f_r,
    const float* fc, int fc_r, const float* gn, int gn_r, const float* dcn,
    int dcn_r, const float* fn, int fn_r, const float* pi, const float* pf,
    const float* po, float* dg, int dg_r, float* dc, int dc_r)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += blockDim.x * gridDim.x) {
        const int b = i / S;
        const int s = i - b * S;
        const float* fr = f + (long long)b * f_r;
        const float* gnr = gn + (long long)b * gn_r;
        float* dgr = dg + (long long)b * dg_r;
        const float d_y = dy[(long long)b * dy_r + s];
        const float d_o = d_y * fr[3 * S + s];
        float d_c = d_y * fc[(long long)b * fc_r + s];
        d_c = d_c + d_o * po[s];
        d_c = d_c + gnr[S + s] * pi[s];
        d_c = d_c + gnr[2 * S + s] * pf[s];
        d_c = d_c + fn[(long long)b * fn_r + s] * dcn[(long long)b * dcn_r + s];
        dgr[s] = d_c * fr[s];
        dgr[S + s] = d_c * fr[S + s];
        dgr[2 * S + s] = d_c * fr[2 * S + s];
        dgr[3 * S + s] = d_o;
        dc[(long long)b * dc_r + s] = d_c;
    }
}

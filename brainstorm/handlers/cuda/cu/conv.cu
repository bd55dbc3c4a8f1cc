/* Convolution: im2col and its adjoint. Image geometry (see the Handler
   docstring): output (i, j) reads input rows i*sy - pad_y + u (0 <= u < kh)
   and columns j*sx - pad_x + v (0 <= v < kw); pad_y and pad_x are the top
   and left padding (the bottom and right padding only decide OH and OW). */
/* col[r, q] for the contiguous (N*OH*OW) x (KH*KW*C) matrix of receptive
   fields: row r = (n, i, j), column q = (u, v, c); zero where the cell is
   padding. x is (N, H, W, C) with element strides x0..x3. */
extern "C" __global__ void im2col(
    int total, int H, int W, int C, int OH, int OW, int KH, int KW, int pad_y, int pad_x, int sy, int sx, const float* x, int x0, int x1, int x2, int x3,
    float* col)
{
    const int K = KH * KW * C;
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += blockDim.x * gridDim.x) {
        int q = e % K;
        int r = e / K;
        int c = q % C;
        int t = q / C;
        int v = t % KW;
        int u = t / KW;
        int j = r % OW;
        t = r / OW;
        int i = t % OH;
        int n = t / OH;
        int y = i * sy - pad_y + u;
        int xx = j * sx - pad_x + v;
        float value = 0.0f;
        if (y >= 0 && y < H && xx >= 0 && xx < W) {
            value = x[(long long)n * x0 + (long long)y * x1 +
                      (long long)xx * x2 + (long long)c * x3];
        }
        col[e] = value;
    }
}

/* The adjoint of im2col, ADDED: every input cell (n, y, x, c) gathers the
   column entries of all outputs whose window covers it (no atomics). dx is
   (N, H, W, C) with element strides d0..d3; col as in im2col. */
extern "C" __global__ void col2im_add(
    int total, int H, int W, int C, int OH, int OW, int KH, int KW, int pad_y, int pad_x, int sy, int sx, const float* col, float* dx, int d0, int d1,
    int d2, int d3)
{
    const int K = KH * KW * C;
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += blockDim.x * gridDim.x) {
        int c = e % C;
        int t = e / C;
        int xx = t % W;
        t /= W;
        int y = t % H;
        int n = t / H;
        float acc = 0.0f;
        for (int u = 0; u < KH; ++u) {
            int ty = y + pad_y - u;
            if (ty < 0 || ty % sy != 0 || ty / sy >= OH) continue;
            int i = ty / sy;
            for (int v = 0; v < KW; ++v) {
                int tx = xx + pad_x - v;
                if (tx < 0 || tx % sx != 0 || tx / sx >= OW) continue;
                int j = tx / sx;
                acc += col[((long long)(n * OH + i) * OW + j) * K +
                           (u * KW + v) * C + c];
            }
        }
        float* target = dx + (long long)n * d0 + (long long)y * d1 +
                        (long long)xx * d2 + (long long)c * d3;
        *target += acc;
    }
}

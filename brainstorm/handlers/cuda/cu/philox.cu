/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
   3", SC 2011): a counter-based generator, so element i of a draw is a pure
   function of (i, key) and needs no per-thread state. Prepended to the
   elementwise kernels, which kernels.py makes from the op table. */
#define BS_2POW_M24 5.9604644775390625e-08f

struct bs_u32x4 { unsigned int x, y, z, w; };

__device__ bs_u32x4 bs_philox(unsigned int counter, unsigned int k0,
                              unsigned int k1)
{
    bs_u32x4 c;
    c.x = counter; c.y = 0u; c.z = 0u; c.w = 0u;
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        unsigned int hi0 = __umulhi(0xD2511F53u, c.x);
        unsigned int lo0 = 0xD2511F53u * c.x;
        unsigned int hi1 = __umulhi(0xCD9E8D57u, c.z);
        unsigned int lo1 = 0xCD9E8D57u * c.z;
        bs_u32x4 next;
        next.x = hi1 ^ c.y ^ k0;
        next.y = lo1;
        next.z = hi0 ^ c.w ^ k1;
        next.w = lo0;
        c = next;
    }
    return c;
}

/* qkv.cu: q and k heads normed and rotated, k and v stored, in one launch (qkv.h). One warp per
 * head of a row: items [0, nh) are q heads, [nh, nh + nkv) k heads, then nkv v heads. A q or k
 * head is normed by rms_core.cuh's warp reduction, the order rmsnorm.cu gives a row of hd <=
 * 1024 entries, each normed value rounded to float into the warp's shared row exactly as
 * rmsnorm.cu stores it; the rotation then reads those floats, the expression of pointwise.cu's
 * rope_k, and the cache stores convert as its kv_store_k. So the launch replaces q_norm, k_norm,
 * two ropes and two KV stores (six launches a layer) without changing a bit. */
#include "cuda/qk_core.cuh"

namespace {

constexpr int QKV_THREADS = 256, QKV_WARPS = QKV_THREADS / 32;
constexpr int QKV_PER = SDC_QK_PER;

/* Every load a warp needs is issued before any is used, so the launch costs about one round trip
 * to memory after the wait (two for the rotation's tables, which need the position first) where
 * a load per step cost one each: the norm weights even before the wait (no kernel writes them,
 * common.cuh), the head's row, the position, then cos / sin. The arithmetic is the order stated
 * above: the lane's squares summed over i = lane, lane + 32, ... (sdc_rms_inv_warp's loop, here
 * from registers), the same apply, the same rotation. */
__global__ void __launch_bounds__(QKV_THREADS) qkv_kernel(const sdc_qkv_params p) {
    __shared__ float rowbuf[QKV_WARPS][SDC_QKV_MAX_HD];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int per_t = p.nh + 2 * p.nkv;
    const int item = blockIdx.x * QKV_WARPS + warp;
    const bool live = item < p.T * per_t;
    const int t = live ? item / per_t : 0, h = item - t * per_t, hd = p.hd, half = hd / 2;
    const bool isv = h >= p.nh + p.nkv, isq = h < p.nh;
    float wv[QKV_PER];
    if (live && !isv) {
        const float *w = isq ? p.qw : p.kw;
#pragma unroll
        for (int k = 0; k < QKV_PER; k++) {
            const int i = lane + 32 * k;
            wv[k] = i < hd ? __ldg(w + i) : 0.0f;
        }
    }
    sdc_grid_enter();
    if (!live) return;   /* whole warps: only warp-level syncs below */
    const size_t pos = (size_t)sdc_pos(p.pos_base, p.pos_off, t);
    const size_t kvrow = (size_t)p.nkv * hd;
    if (isv) {   /* v head: stored as is */
        const int kh = h - p.nh - p.nkv;
        const float *src = p.v + (size_t)t * kvrow + (size_t)kh * hd;
        float vv[QKV_PER];
#pragma unroll
        for (int k = 0; k < QKV_PER; k++) {
            const int i = lane + 32 * k;
            vv[k] = i < hd ? src[i] : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < QKV_PER; k++) {
            const int i = lane + 32 * k;
            if (i < hd) sdc_kv_put(p.kv_dt, p.vc, pos * kvrow + (size_t)kh * hd + i, vv[k]);
        }
        return;
    }
    const int kh = h - p.nh;
    float *x = isq ? p.q + (size_t)t * p.nh * hd + (size_t)h * hd : p.k + (size_t)t * kvrow + (size_t)kh * hd;
    float xv[QKV_PER], cv[QKV_PER / 2], sv[QKV_PER / 2];
#pragma unroll
    for (int k = 0; k < QKV_PER; k++) {
        const int i = lane + 32 * k;
        xv[k] = i < hd ? x[i] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < QKV_PER / 2; k++) {
        const int j = lane + 32 * k;
        cv[k] = j < half ? __ldg(p.cos_t + pos * half + j) : 0.0f;
        sv[k] = j < half ? __ldg(p.sin_t + pos * half + j) : 0.0f;
    }
    float *s = rowbuf[warp];
    sdc_qk_norm(xv, wv, hd, p.eps, lane, s);
    __syncwarp();
#pragma unroll
    for (int k = 0; k < QKV_PER / 2; k++) {
        const int j = lane + 32 * k;
        if (j >= half) continue;
        float a, b;
        sdc_qk_rot(s, j, half, cv[k], sv[k], a, b);
        x[j] = a;
        x[j + half] = b;
        if (!isq) {
            const size_t o = pos * kvrow + (size_t)kh * hd;
            sdc_kv_put(p.kv_dt, p.kc, o + j, a);
            sdc_kv_put(p.kv_dt, p.kc, o + j + half, b);
        }
    }
}

} // namespace

extern "C" cudaError_t sdc_qk_norm_rope_store(const sdc_qkv_params *p, const sdc_dev *d) {
    if (p->T <= 0) return cudaSuccess;
    if (p->hd < 2 || p->hd % 2 || p->hd > SDC_QKV_MAX_HD || p->nh <= 0 || p->nkv <= 0) return cudaErrorInvalidValue;
    const long items = (long)p->T * (p->nh + 2 * p->nkv);
    return sdc_launch(d, qkv_kernel, (unsigned)((items + QKV_WARPS - 1) / QKV_WARPS), QKV_THREADS, 0, *p);
}

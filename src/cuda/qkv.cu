/* qkv.cu: q and k heads normed and rotated, k and v stored, in one launch (qkv.h). One warp per
 * head of a row: items [0, nh) are q heads, [nh, nh + nkv) k heads, then nkv v heads. A q or k
 * head is normed by rms_core.cuh's warp reduction, the order rmsnorm.cu gives a row of hd <=
 * 1024 entries, each normed value rounded to float into the warp's shared row exactly as
 * rmsnorm.cu stores it; the rotation then reads those floats, the expression of pointwise.cu's
 * rope_k, and the cache stores convert as its kv_store_k. So the launch replaces q_norm, k_norm,
 * two ropes and two KV stores (six launches a layer) without changing a bit. */
#include "cuda/qkv.h"
#include "cuda/rms_core.cuh"

namespace {

constexpr int QKV_THREADS = 256, QKV_WARPS = QKV_THREADS / 32;

__global__ void __launch_bounds__(QKV_THREADS) qkv_kernel(const sdc_qkv_params p) {
    __shared__ float rowbuf[QKV_WARPS][SDC_QKV_MAX_HD];
    sdc_grid_enter();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int per_t = p.nh + 2 * p.nkv;
    const int item = blockIdx.x * QKV_WARPS + warp;
    if (item >= p.T * per_t) return;   /* whole warps: only warp-level syncs below */
    const int t = item / per_t, h = item - t * per_t, hd = p.hd, half = hd / 2;
    const size_t pos = (size_t)sdc_pos(p.pos_base, p.pos_off, t);
    const size_t kvrow = (size_t)p.nkv * hd;
    if (h >= p.nh + p.nkv) {   /* v head: stored as is */
        const int kh = h - p.nh - p.nkv;
        const float *src = p.v + (size_t)t * kvrow + (size_t)kh * hd;
        for (int i = lane; i < hd; i += 32) sdc_kv_put(p.kv_dt, p.vc, pos * kvrow + (size_t)kh * hd + i, src[i]);
        return;
    }
    const bool isq = h < p.nh;
    const int kh = h - p.nh;
    float *x = isq ? p.q + (size_t)t * p.nh * hd + (size_t)h * hd : p.k + (size_t)t * kvrow + (size_t)kh * hd;
    const float *w = isq ? p.qw : p.kw;
    float *s = rowbuf[warp];
    const float inv = sdc_rms_inv_warp(x, hd, p.eps, lane);
    for (int i = lane; i < hd; i += 32) s[i] = sdc_rms_apply(x[i], inv, __ldg(w + i));
    __syncwarp();
    for (int j = lane; j < half; j += 32) {
        const float c = __ldg(p.cos_t + pos * half + j), sn = __ldg(p.sin_t + pos * half + j);
        const float x1 = s[j], x2 = s[j + half];
        const float a = x1 * c - x2 * sn, b = x2 * c + x1 * sn;
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

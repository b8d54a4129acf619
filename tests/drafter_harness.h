/* drafter_harness.h: driving a drafter by hand in the CPU tests (header-only, static). The CPU
 * backend's memory is host memory, so host arrays serve as the backend buffers the drafter
 * protocol names (speculative/drafter.h). */
#ifndef SD_DRAFTER_HARNESS_H
#define SD_DRAFTER_HARNESS_H
#include "speculative/drafter.h"
#include "model/ctx.h"

/* Bind d to context c (t receives the target view). */
static inline specdec_status th_bind(specdec_drafter *d, specdec_ctx *c, sd_target *t, specdec_err *err) {
    sd_target_of(t, c);
    return sd_drafter_attach(d, c, t, err);
}

/* Positions pos0..pos0+T-1 verified: tokens x_{pos0+1}.. (host), hidden (T, H) (host). */
static inline specdec_status th_accept(specdec_drafter *d, int pos0, const int32_t *tok, const float *hid, int T,
                                       specdec_err *err) {
    static int32_t pos_v;
    pos_v = pos0;
    sd_accept a = {.pos0 = pos0, .T = T, .pos = {&pos_v, 0}, .tokens = tok, .tokens_host = tok, .hidden = hid, .own = 0};
    return d->vt->accept(d, &a, err);
}

/* The request's position as the backend's int32 (host memory on the CPU). */
static int32_t th_pos_v;
static inline const int32_t *th_pos(int P) { th_pos_v = P; return &th_pos_v; }

#endif

/* drafter.h: the drafter interface of speculative decoding (a struct of function pointers) and
 * helpers shared by its implementations (drafter_mtp.c, drafter_model.c, drafter_ngram.c).
 *
 * Protocol, with committed tokens x_0..x_P where x_P is the current bonus (chosen by the target,
 * not yet in the target's KV cache, which holds positions 0..P-1):
 *   bind(target)                 once per generation: allocate / refresh state for this target
 *   prefill(x_0..x_{n-1})        the prompt (host ids; resets everything before)
 *   accept(a)                    positions a->pos0..a->pos0+T-1 are verified: the tokens are
 *                                x_{pos0+1}..x_{pos0+T} (the last one is the new bonus), the hidden
 *                                states h_{pos0}..h_{pos0+T-1} (T, H) after model.norm (NULL unless
 *                                needs_hidden). ONE call per round over the whole verified slice;
 *                                pos0 is always where the previous accept ended (0 after prefill).
 *   draft(req)                   propose x_{P+1}..x_{P+n} into backend memory; anything the drafter
 *                                wrote for speculative positions is replaced by the next accept.
 * Token ids and hidden states live in the target's backend memory; accept also gets a host copy of
 * the tokens (the round reads the emitted ids back once per round anyway). Drafter numerics never
 * change the output: the target verifies everything. */
#ifndef SD_SPEC_DRAFTER_H
#define SD_SPEC_DRAFTER_H
#include "specdec.h"
#include "speculative/target.h"
#include "sample/sample.h"

typedef enum sd_draft_mode {
    SD_DRAFT_GREEDY = 0,   /* argmax of the draft logits */
    SD_DRAFT_SEEDED = 1,   /* sd_sample(params, draft logits, pos): the target's Gumbel noise at pos */
    SD_DRAFT_SAMPLE = 2    /* sample from the filtered draft distribution q (rejection mode) */
} sd_draft_mode;

typedef struct sd_draft_req {
    int n;                               /* tokens wanted (>= 1) */
    int64_t pos;                         /* P: position of the bonus; drafts are for P+1..P+n */
    int32_t bonus;                       /* x_P */
    sd_draft_mode mode;
    const specdec_sampling_params *sp;   /* the target's sampling parameters */
    int32_t *out;                        /* backend (n): the proposals; out[-1] holds the bonus */
    const int32_t *pos_dev;              /* backend (1): the target's n_past, P */
    sd_dist *q;                          /* host (n): filled in SAMPLE mode by drafters that support it */
} sd_draft_req;

/* One verified slice (see the protocol above). */
typedef struct sd_accept {
    int pos0, T;
    sd_pos pos;                          /* backend position of row 0 (its value is pos0) */
    const int32_t *tokens;               /* backend (T) */
    const int32_t *tokens_host;          /* host (T), the same ids */
    const float *hidden;                 /* backend (T, H), or NULL */
    int own;                             /* the first `own` tokens are this drafter's own drafts of the
                                          * round just verified (accepted: they equal what it proposed) */
} sd_accept;

typedef struct sd_drafter_prof {
    int64_t steps;                       /* draft steps profiled */
    double upload_ms, embed_ms, layers_ms, head_ms, sample_ms, readback_ms;
    int64_t clock_reads;                 /* clock reads the profile itself made */
    int64_t lookup_rounds;               /* drafts taken from the context (mtp+ngram), counted always */
} sd_drafter_prof;

typedef struct sd_drafter_vt {
    const char *name;
    bool needs_hidden;       /* accept needs the target's hidden states */
    bool supports_sampling;  /* SAMPLE mode fills q */
    bool supports_tree;      /* draft_tree is implemented */
    specdec_status (*bind)(specdec_drafter *d, const sd_target *t, specdec_err *err);
    specdec_status (*prefill)(specdec_drafter *d, const int32_t *prompt, int n, specdec_err *err);
    specdec_status (*draft)(specdec_drafter *d, sd_draft_req *req, int *n_out, specdec_err *err);
    void *draft_tree;        /* reserved for tree drafting (NULL: chains only) */
    specdec_status (*accept)(specdec_drafter *d, const sd_accept *a, specdec_err *err);
    void (*reset)(specdec_drafter *d);
    /* Give back everything held on the bound target's backend (the context is going away, or the
     * drafter moves to another one); the next bind allocates afresh. */
    void (*release)(specdec_drafter *d);
    void (*profile)(const specdec_drafter *d, sd_drafter_prof *out);
    void (*free)(specdec_drafter *d);
} sd_drafter_vt;

/* The adaptive block-width controller (block_size = 0; adaptive.c): widths 1..SD_AUTO_MAX_W,
 * 1 = classic. */
#define SD_AUTO_MAX_W 8
typedef struct sd_auto {
    double asked[SD_AUTO_MAX_W], taken[SD_AUTO_MAX_W];   /* [j]: decayed rounds that checked / accepted draft j */
    double ms[SD_AUTO_MAX_W + 1], n_ms[SD_AUTO_MAX_W + 1];   /* decayed round ms and rounds per width, */
    double first_ms[SD_AUTO_MAX_W + 1];                      /* its first round apart */
    int64_t rounds[SD_AUTO_MAX_W + 1];
    int64_t n;            /* decisions made */
    uint64_t rng;
    double eps;           /* probability of a neighbour of the best width */
    double decay;
    double prior_p, prior_n;   /* acceptance prior: mean, weight in rounds */
    double prior_slope;   /* a width's extra cost, a share of the one measured width's, before two are */
} sd_auto;
struct specdec_drafter {
    const sd_drafter_vt *vt;
    void *impl;
    specdec_ctx *bound;      /* the context whose backend holds this drafter's buffers, or NULL */
    bool profile;            /* set by the round: time the sub-steps of each draft step */
    /* exactness probe cache: the result for the last target it ran on (model, backend + kernels,
     * threads, KV dtype) */
    const void *probe_model; char probe_kernels[96]; int probe_threads, probe_kv, probe_K, probe_result;
    double probe_ms;
    /* auto block width: measured rates persist across generations with the same target */
    sd_auto au; const void *au_model; int au_threads;
};

/* Pick a draft token from a host logits row (V floats) at position pos, per req->mode; in SAMPLE
 * mode the filtered distribution goes to *q (when non-NULL). ws is scratch sized for V. */
int32_t sd_draft_choose(sd_sampler_ws *ws, const sd_draft_req *req, const float *logits, int V,
                        int64_t pos, sd_dist *q);

/* Whether the backend itself can choose draft j of req (greedy, or seeded when its sampler takes
 * the filters in use); else the logits are read back and chosen on the host. */
bool sd_draft_on_backend(const sd_backend *b, const sd_draft_req *req);
/* Choose draft j of req from logits (backend, n entries; map: the draft vocabulary's ids on the
 * backend or NULL) into req->out[j]: on the backend when it can, else through a host view
 * (host_row: V floats of host scratch, host_sc: V floats of -inf, both only for the host path). */
specdec_status sd_draft_pick(sd_backend *b, const sd_draft_req *req, int j, const float *logits, int n, int vocab,
                             const int32_t *map_dev, const int32_t *map_host, sd_sampler_ws *ws, float *host_row,
                             float *host_sc, specdec_err *err);

/* Bind d to context c for a generation: a drafter bound elsewhere first gives its backend buffers
 * back; the context remembers it so that freeing either side detaches the other. */
specdec_status sd_drafter_attach(specdec_drafter *d, specdec_ctx *c, const sd_target *t, specdec_err *err);
/* Release the backend buffers of d and forget its context (no-op when unbound). */
void sd_drafter_detach(specdec_drafter *d);

/* Monotonic clock in ms (src/decode/generate.c). */
double sd_now_ms(void);

/* Constructors (one per file). */
specdec_status sd_drafter_mtp_new(const specdec_model *target, specdec_drafter **out, specdec_err *err);
specdec_status sd_drafter_model_new(const specdec_model *target, const char *dir, specdec_drafter **out,
                                    specdec_err *err);
specdec_status sd_drafter_ngram_new(int max_n, specdec_drafter **out, specdec_err *err);
/* The same, proposing only from a match of at least min_n tokens (none otherwise). */
specdec_status sd_drafter_ngram_new_min(int max_n, int min_n, specdec_drafter **out, specdec_err *err);
/* MTP with prompt lookup (drafter_hybrid.c): a round drafts from the context when its last min_n
 * or more tokens occurred before, else with the MTP module. */
specdec_status sd_drafter_hybrid_new(const specdec_model *target, int min_n, specdec_drafter **out, specdec_err *err);
/* The MTP part of an mtp+ngram drafter, or NULL when d is another kind. */
specdec_drafter *sd_drafter_hybrid_mtp(const specdec_drafter *d);
#define SD_HYBRID_MIN_N_DEFAULT 2

#endif

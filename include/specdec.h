/* specdec.h: the one public header of specdec, a C inference engine for Qwen3-family
 * models built around speculative decoding at batch size 1.
 *
 * Conventions
 * - Handles are opaque; each *_init / *_load has a matching *_free (NULL is accepted).
 * - Parameters come as structs filled by *_default_params(); set what you need, then pass.
 * - Every fallible function returns a specdec_status and, when `err` is non-NULL, writes a
 *   human-readable message that names the file, tensor, key or byte at fault. The library
 *   never exits or aborts on bad input.
 * - Token ids are int32_t. Text is UTF-8.
 */
#ifndef SPECDEC_H
#define SPECDEC_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status and errors ------------------------------------------------------------ */

typedef enum specdec_status {
    SPECDEC_OK = 0,
    SPECDEC_ERR_IO,           /* a file could not be opened / read / written */
    SPECDEC_ERR_FORMAT,       /* a file is malformed (bad JSON, bad safetensors header, ...) */
    SPECDEC_ERR_CONFIG,       /* config.json misses a key or holds a value out of range */
    SPECDEC_ERR_MISSING,      /* a required tensor or file is absent */
    SPECDEC_ERR_SHAPE,        /* a tensor's shape contradicts the config */
    SPECDEC_ERR_DTYPE,        /* a tensor has a dtype we cannot use there */
    SPECDEC_ERR_UNSUPPORTED,  /* well-formed but not supported (unknown model_type, template, ...) */
    SPECDEC_ERR_INVALID_ARG,  /* a caller passed an invalid argument */
    SPECDEC_ERR_UTF8,         /* input text is not valid UTF-8 */
    SPECDEC_ERR_CONTEXT,      /* the request does not fit the context window */
    SPECDEC_ERR_NOMEM,        /* allocation failed */
    SPECDEC_ERR_CANCELLED,    /* the caller cancelled the operation */
    SPECDEC_ERR_INTERNAL      /* a broken invariant: a bug in specdec */
} specdec_status;

/* A caller-owned error record. The library fills `msg` (NUL-terminated, truncated if long). */
typedef struct specdec_err {
    specdec_status status;
    char msg[512];
} specdec_err;

/* Static name of a status ("ok", "io", "format", ...). */
const char *specdec_status_name(specdec_status st);

/* The library's version, "MAJOR.MINOR.PATCH" (CMake's project version, defined once there). */
const char *specdec_version(void);

/* ---- logging ---------------------------------------------------------------------- */

/* The library never prints. What it has to say outside a return value (a declined speculation, a
 * fallback) goes to a callback the application installs; none is installed by default. */
typedef enum specdec_log_level {
    SPECDEC_LOG_DEBUG = 0,
    SPECDEC_LOG_INFO,
    SPECDEC_LOG_WARN,
    SPECDEC_LOG_ERROR
} specdec_log_level;

typedef void (*specdec_log_fn)(specdec_log_level level, const char *msg, void *user);

/* Install (fn non-NULL) or remove (NULL) the process-wide log callback. Not thread-safe against
 * generations running on other threads: set it first. */
void specdec_log_set(specdec_log_fn fn, void *user);
/* "debug", "info", "warning", "error". */
const char *specdec_log_level_name(specdec_log_level level);

/* ---- dtypes ----------------------------------------------------------------------- */

typedef enum specdec_dtype {
    SPECDEC_DTYPE_F32 = 0,
    SPECDEC_DTYPE_F16,
    SPECDEC_DTYPE_BF16,
    SPECDEC_DTYPE_U32,
    SPECDEC_DTYPE_I32,
    SPECDEC_DTYPE_I64,
    SPECDEC_DTYPE_U8,
    SPECDEC_DTYPE_COUNT
} specdec_dtype;

const char *specdec_dtype_name(specdec_dtype dt);

/* The CPU kernel level contexts use: "avx512", "avx2", "neon" or "scalar" (portable C), the best
 * this machine runs unless the environment variable SPECDEC_SIMD names one; a name it cannot run
 * makes context creation fail with SPECDEC_ERR_INVALID_ARG, and this return NULL. Each level is batch- and thread-
 * invariant; different levels sum in different orders, so their results may differ in the last bits. */
const char *specdec_cpu_kernels(void);
/* Why that level: "forced by SPECDEC_SIMD=...", or the calibration (timings per level, cached or
 * measured now); into buf (NUL-terminated). */
void specdec_cpu_kernels_why(char *buf, size_t n);
/* SPECDEC_OK, or the error context creation would give for the SPECDEC_SIMD setting. */
specdec_status specdec_cpu_kernels_check(specdec_err *err);

/* ---- model ------------------------------------------------------------------------ */

typedef struct specdec_model specdec_model;

/* Called while a model loads; `done` and `total` are bytes. Return false to cancel. */
typedef bool (*specdec_progress_fn)(uint64_t done, uint64_t total, void *user);

typedef struct specdec_model_params {
    specdec_progress_fn progress; /* may be NULL */
    void *progress_user;
    bool load_mtp;                /* bind the mtp.* drafter module when present (default true) */
} specdec_model_params;

specdec_model_params specdec_model_default_params(void);

/* Load a Hugging Face style Qwen3 model directory (config.json + safetensors). The weights are
 * mmapped and validated; the model owns the mapping until specdec_model_free. */
specdec_status specdec_model_load(const char *dir, const specdec_model_params *params,
                                  specdec_model **out, specdec_err *err);
void specdec_model_free(specdec_model *m);

typedef struct specdec_model_info {
    char model_type[32];
    int vocab_size, hidden_size, intermediate_size, n_layers, n_heads, n_kv_heads, head_dim;
    int max_position_embeddings;
    double rope_theta;
    float rms_norm_eps;
    bool tied_embeddings;
    int quant_bits, quant_group;    /* 0 when the linears are dense */
    specdec_dtype weight_dtype;     /* dtype of dense weights / quantization scales */
    int mtp_layers;                 /* 0 when no drafter module is bound */
    int n_eos; int32_t eos_ids[8];
    uint64_t n_params;              /* logical parameters of the target (quantized counted unpacked) */
    uint64_t n_params_mtp;
    uint64_t weight_bytes;          /* bytes of all target tensors as stored */
    uint64_t decode_bytes_per_token;/* weight bytes one decode step must read (embedding row, not table) */
} specdec_model_info;

void specdec_model_get_info(const specdec_model *m, specdec_model_info *out);

/* ---- tokenizer -------------------------------------------------------------------- */

typedef struct specdec_tokenizer specdec_tokenizer;

/* Load DIR/tokenizer.json (and DIR/tokenizer_config.json when present). Needs no weights. */
specdec_status specdec_tokenizer_load(const char *dir, specdec_tokenizer **out, specdec_err *err);
void specdec_tokenizer_free(specdec_tokenizer *t);

/* Encode UTF-8 text. Special/added tokens in the text are matched before BPE. Invalid UTF-8 is
 * an error (SPECDEC_ERR_UTF8, naming the byte offset). *ids is malloc'ed; caller frees. */
specdec_status specdec_tokenize(const specdec_tokenizer *t, const char *text, size_t len,
                                int32_t **ids, size_t *n_ids, specdec_err *err);

/* Decode ids to bytes (the raw bytes the tokens stand for, which may be invalid UTF-8 when a
 * character is split). *out is malloc'ed and NUL-terminated; *out_len excludes the NUL. */
specdec_status specdec_detokenize(const specdec_tokenizer *t, const int32_t *ids, size_t n_ids,
                                  char **out, size_t *out_len, specdec_err *err);

int specdec_tokenizer_vocab_size(const specdec_tokenizer *t);
/* Id of a token given its exact content (e.g. "<|im_end|>"), or -1. */
int32_t specdec_tokenizer_token_id(const specdec_tokenizer *t, const char *content);
/* Chat template of tokenizer_config.json, or NULL. */
const char *specdec_tokenizer_chat_template(const specdec_tokenizer *t);
/* Ids that end generation according to tokenizer_config.json (eos_token), may be 0. */
int specdec_tokenizer_eos_ids(const specdec_tokenizer *t, int32_t *ids, int max_ids);

/* Streaming decoder: feeds token ids, emits only complete UTF-8 characters so a character
 * that spans tokens is printed once, whole. */
typedef struct specdec_stream_decoder specdec_stream_decoder;
specdec_status specdec_stream_decoder_init(const specdec_tokenizer *t, specdec_stream_decoder **out,
                                           specdec_err *err);
/* Append the text of `id`; *text points into decoder-owned storage valid until the next call
 * (may be empty). */
specdec_status specdec_stream_decoder_push(specdec_stream_decoder *d, int32_t id,
                                           const char **text, size_t *len);
/* Flush what is held back (an incomplete character at the end comes out as U+FFFD). */
void specdec_stream_decoder_flush(specdec_stream_decoder *d, const char **text, size_t *len);
void specdec_stream_decoder_free(specdec_stream_decoder *d);

/* ---- context: KV cache, scratch, threads ------------------------------------------ */

/* KV cache element type. DEFAULT: the backend's measured choice, bf16 on the CPU's int8 path (the
 * backends on CPU threads at precision int8: decode 1.03-1.12x at 512 tokens, no measurable
 * quality cost, docs/benchmarks/cpu-kv-bf16-xeon-2026-12-05.md), f32 elsewhere (precision f32,
 * the reference kernels, CUDA until measured there). */
typedef enum specdec_kv_dtype {
    SPECDEC_KV_F32 = 0,
    SPECDEC_KV_BF16,
    SPECDEC_KV_F16,
    SPECDEC_KV_DEFAULT
} specdec_kv_dtype;

typedef struct specdec_ctx specdec_ctx;

/* Activations of matmuls over quantized weights: f32 (the reference), or int8 in blocks of 32
 * with integer dot products (CPU; matrices it cannot take stay f32). */
typedef enum specdec_precision {
    SPECDEC_PRECISION_DEFAULT = 0,
    SPECDEC_PRECISION_F32 = 1,
    SPECDEC_PRECISION_INT8 = 2,
} specdec_precision;

/* How a context holds the MTP drafter's dense (bf16 / f16 / f32) matrices. Q4: quantized at load
 * to 4-bit affine codes in groups of 64 with scales of the matrix's dtype, the quantizer of
 * `specdec quantize --quantize-mtp` (the same weights it writes). Quantized drafters are kept. */
typedef enum specdec_drafter_weights {
    SPECDEC_DRAFTER_WEIGHTS_DEFAULT = 0,
    SPECDEC_DRAFTER_WEIGHTS_STORED = 1,
    SPECDEC_DRAFTER_WEIGHTS_Q4 = 2,
} specdec_drafter_weights;

typedef struct specdec_ctx_params {
    int n_ctx;                 /* context length in tokens; 0 = model's max_position_embeddings */
    int n_threads;             /* CPU backend threads; 0 = number of online CPUs */
    specdec_kv_dtype kv_dtype; /* default: SPECDEC_KV_DEFAULT (the backend's choice; 0 is f32) */
    bool reference_kernels;    /* CPU backend: the scalar reference ops (slow; for tests) */
    int max_batch;             /* most positions per forward call (prefill chunk, verify width); 0 (default):
                                * the backend's measured choice (specdec_ctx_max_batch says which) */
    const char *backend;       /* "auto" (default: a GPU when one is present, else the CPU), "cpu", "cuda";
                                * an unknown or unavailable one is an error listing specdec_backends() */
    int device;                /* GPU index for GPU backends (default 0) */
    specdec_progress_fn progress; /* weight bytes copied to the backend / total, after each tensor (not called
                                   * where the upload is a view of the mapping, as on the CPU); may be NULL;
                                   * false cancels (SPECDEC_ERR_CANCELLED) */
    void *progress_user;
    specdec_precision precision; /* activations of the quantized matmuls (default: the backend's
                                * measured choice; f32 is the reference the HF checks hold to) */
    int tp;                    /* tensor-parallel ranks (docs/tensor-parallel.md): 0 = none (default); N >= 1
                                * splits heads and MLP columns over N ranks of `backend`: GPUs device ..
                                * device+N-1 over NCCL, or (cpu, cpu-sim) the CPU simulation, a correctness tool */
    int tp_reduce;             /* 0: all-gather + sum in rank order (batch-invariant, default); 1: NCCL's ring
                                * all-reduce (not batch-invariant at tp >= 3); 2: none (wrong output; timing) */
    specdec_drafter_weights drafter_weights; /* the MTP drafter's dense weights on this context (default: the
                                * backend's measured choice: 4-bit at precision int8 on the CPU, and on a device
                                * for drafters of 100 M parameters or more; as stored elsewhere). Greedy and
                                * seeded output never depends on the drafter; rejection sampling keeps its
                                * distribution, its samples follow the drafts. */
} specdec_ctx_params;

specdec_ctx_params specdec_ctx_default_params(void);

specdec_status specdec_ctx_init(const specdec_model *m, const specdec_ctx_params *p,
                                specdec_ctx **out, specdec_err *err);
void specdec_ctx_free(specdec_ctx *c);

/* The backends built into this library, comma separated ("cpu, cuda"). */
const char *specdec_backends(void);
/* What backend `name` ("auto", "cpu", "cuda") resolves to on this machine, with its kernel variant
 * and threads or device, e.g. "cpu (avx512, 2 threads)" or "cuda (sm_90, NVIDIA H200)", into buf;
 * the error context creation would give when it cannot be used. */
specdec_status specdec_backend_describe(const char *name, int n_threads, int device, char *buf, size_t n,
                                        specdec_err *err);
/* The backend a context runs on ("cpu", "cuda") and its kernel variant ("avx512", "sm_90 ..."). */
const char *specdec_ctx_backend(const specdec_ctx *c);
const char *specdec_ctx_kernels(const specdec_ctx *c);
/* The KV cache dtype the context runs with: SPECDEC_KV_DEFAULT resolved to the backend's choice
 * (SPECDEC_KV_DEFAULT for a NULL context). */
specdec_kv_dtype specdec_ctx_kv_dtype(const specdec_ctx *c);
/* The most positions one forward call of the context runs (its max_batch, 0 resolved to the
 * backend's choice); 0 for a NULL context. */
int specdec_ctx_max_batch(const specdec_ctx *c);
/* The MTP drafter's dense weights on the context, the default resolved: SPECDEC_DRAFTER_WEIGHTS_Q4
 * (4-bit codes made at load) or SPECDEC_DRAFTER_WEIGHTS_STORED; SPECDEC_DRAFTER_WEIGHTS_DEFAULT
 * when the model has no MTP module (or for a NULL context). */
specdec_drafter_weights specdec_ctx_drafter_weights(const specdec_ctx *c);
/* Bytes of weights one MTP draft step reads on the context: the drafter module's matrices as held
 * there (specdec_ctx_drafter_weights) and its norm vectors, one embedding row, and head_rows rows
 * of the LM head (the draft vocabulary's size, or the vocabulary size for the full head; rows
 * beyond the vocabulary count as the vocabulary). Over a measured bandwidth it is the draft step's
 * floor. 0 without a drafter module. */
uint64_t specdec_ctx_drafter_step_bytes(const specdec_ctx *c, int head_rows);

/* Counters of the backend a context runs on (shared by the drafters running there). */
typedef struct specdec_backend_stats {
    uint64_t upload_bytes;      /* weights copied to the backend (0 for the CPU's zero-copy views) */
    uint64_t write_calls, write_bytes, read_calls, read_bytes;
    double write_ms, read_ms;   /* host time spent in write / read (a read includes the wait) */
    uint64_t ops;               /* op calls run (a replayed recording counts its ops) */
    uint64_t seq_recorded, seq_replayed;   /* recorded launch sequences (CUDA graphs), replays */
    uint64_t graph_kernels;     /* kernels run by recordings (each run of a graph adds its kernel
                                 * nodes; kernels of ops issued outside recordings are not counted) */
} specdec_backend_stats;
void specdec_ctx_backend_stats(const specdec_ctx *c, specdec_backend_stats *out);

/* Tensor parallelism of a context (all zero without): ranks, communicator ("nccl", "sim"), and the
 * all-reduces run so far (calls, floats per rank, host time spent issuing / running them). */
typedef struct specdec_tp_stats {
    int ranks;
    const char *comm;
    uint64_t allreduce_calls, allreduce_floats;
    double allreduce_ms;
} specdec_tp_stats;
void specdec_ctx_tp_stats(const specdec_ctx *c, specdec_tp_stats *out);
/* The tensor-parallel plan of model m over n ranks as text (per rank: heads, KV heads, MLP columns,
 * weight bytes) into buf; SPECDEC_ERR_INVALID_ARG naming the shape when it does not split. */
specdec_status specdec_tp_describe(const specdec_model *m, int n, char *buf, size_t len, specdec_err *err);

/* Number of positions currently held in the KV cache. */
int specdec_ctx_n_past(const specdec_ctx *c);
/* Drop KV entries at positions >= n (rollback without copy). n must be <= n_past. */
specdec_status specdec_ctx_truncate(specdec_ctx *c, int n, specdec_err *err);

/* Run the target over T tokens at positions n_past..n_past+T-1, appending them to the KV
 * cache. When `logits` is non-NULL it receives (T, vocab) f32 logits, row t for position
 * n_past+t; when `hidden` is non-NULL it receives (T, hidden) final hidden states (after
 * model.norm). The values for a position are bitwise identical whatever T, the thread count
 * and the way a sequence was split into calls (batch invariance). */
specdec_status specdec_ctx_forward(specdec_ctx *c, const int32_t *tokens, int T,
                                   float *logits, float *hidden, specdec_err *err);

/* ---- sampling ---------------------------------------------------------------------- */

typedef struct specdec_sampling_params {
    float temperature;   /* 0 = greedy */
    int top_k;           /* 0 = off */
    float top_p;         /* 1 = off */
    float min_p;         /* 0 = off */
    uint64_t seed;
} specdec_sampling_params;

specdec_sampling_params specdec_sampling_default_params(void);

/* Choose the token at absolute position `pos` from `logits` (vocab floats, not modified).
 * Randomness is a pure function of (seed, pos): a seeded run is reproducible to the byte. */
int32_t specdec_sample(const specdec_sampling_params *p, const float *logits, int vocab, int64_t pos);

/* generation_config.json: the sampling defaults and end-of-sequence ids the model's authors chose.
 * Read by specdec_model_load when the directory has one (a bad value fails the load, naming the
 * file and the key). do_sample false means greedy (temperature 0) whatever the temperature says. */
typedef enum specdec_gen_key {
    SPECDEC_GEN_TEMPERATURE = 0, SPECDEC_GEN_TOP_K, SPECDEC_GEN_TOP_P, SPECDEC_GEN_MIN_P, SPECDEC_GEN_N_KEYS
} specdec_gen_key;

typedef struct specdec_generation_config {
    bool present;                          /* the directory has generation_config.json */
    specdec_sampling_params sampling;      /* specdec_sampling_default_params() with the file's values over it */
    bool from_file[SPECDEC_GEN_N_KEYS];    /* which of them the file set */
    bool greedy_by_do_sample;              /* "do_sample": false made temperature 0 */
    int n_eos; int32_t eos_ids[8];         /* its eos_token_id (added to config.json's end ids) */
} specdec_generation_config;

void specdec_model_generation_config(const specdec_model *m, specdec_generation_config *out);

/* ---- generation -------------------------------------------------------------------- */

/* Called with each piece of text as it becomes printable. Return false to cancel. */
typedef bool (*specdec_text_fn)(const char *text, size_t len, void *user);

typedef struct specdec_gen_params {
    int max_tokens;                   /* token budget; never exceeded */
    specdec_sampling_params sampling;
    const char *const *stop;          /* stop strings (not emitted), may be NULL */
    int n_stop;
    bool ignore_eos;
    specdec_text_fn on_text; void *user;
    volatile int *cancel;             /* set non-zero from anywhere to stop within one step */
} specdec_gen_params;

specdec_gen_params specdec_gen_default_params(void);
/* specdec_gen_default_params() with the sampling defaults of the model's generation_config.json
 * (when it has one); set any field afterwards to override it. */
specdec_gen_params specdec_model_gen_default_params(const specdec_model *m);

typedef struct specdec_gen_stats {
    int prompt_tokens, generated_tokens;
    double prefill_ms, decode_ms;
    double prefill_tok_s, decode_tok_s;
    int stop_reason;                  /* a specdec_stop_reason */
    uint64_t seed;                    /* the sampling seed the generation used */
    double device_ms;                 /* backends with device timers (CUDA): the device time of the
                                       * decode's rounds, each from its first op to its readback's
                                       * result (and the drafter's feed); decode_ms minus it is what
                                       * the device waited on the host (readback latency, emitting,
                                       * the next round's launch). 0 elsewhere. */
} specdec_gen_stats;

/* Why a generation ended. */
typedef enum specdec_stop_reason {
    SPECDEC_STOP_LENGTH = 0,          /* the token budget (max_tokens) was reached */
    SPECDEC_STOP_EOS = 1,             /* an end-of-sequence token */
    SPECDEC_STOP_STRING = 2,          /* a stop string */
    SPECDEC_STOP_CANCELLED = 3,       /* the caller cancelled (gp->cancel or on_text returned false) */
    SPECDEC_STOP_CONTEXT = 4          /* the context window is full */
} specdec_stop_reason;
/* "length", "eos", "stop", "cancelled", "context_full"; "unknown" for other values. */
const char *specdec_stop_reason_name(int reason);

/* Classic decoding: prefill `prompt` (ids) into a fresh context state, then sample up to
 * max_tokens. Generated ids are written to *out_ids (malloc'ed, may be NULL). */
specdec_status specdec_generate(specdec_ctx *c, const specdec_tokenizer *tok,
                                const int32_t *prompt, int n_prompt, const specdec_gen_params *p,
                                int32_t **out_ids, int *n_out, specdec_gen_stats *stats,
                                specdec_err *err);

/* ==== speculative decoding ========================================================== *
 * (the speculative-decoding core lives in src/speculative/)
 *
 * A drafter proposes a block of tokens; the target verifies them in one forward pass (T = K
 * positions) and keeps the agreeing prefix plus one token of its own. At temperature 0, and in
 * the seeded sampling mode, the output is byte-identical to specdec_generate on the same ctx.
 *
 * A drafter is bound to one target ctx at a time (it shares the ctx's thread pool and keeps its
 * own KV cache); use one drafter per ctx, never the same drafter from two threads at once.
 * Rejection sampling with a fixed block size is reproducible for a seed; with block_size = 0
 * (auto) the widths follow measured speed, so the sample drawn (never its distribution) may vary
 * from run to run. Greedy and seeded output never depends on the width. The exactness probe's
 * result is cached on the drafter per (model, kernels, threads, KV dtype). */

typedef struct specdec_drafter specdec_drafter;

/* The mtp.* module of `target` (loaded with load_mtp = true); it borrows the target's
 * embedding and LM head. SPECDEC_ERR_MISSING when the checkpoint has no MTP module. */
specdec_status specdec_drafter_init_mtp(const specdec_model *target, specdec_drafter **out,
                                        specdec_err *err);
/* A separate draft model directory with the same vocabulary as `target`. */
specdec_status specdec_drafter_init_model(const specdec_model *target, const char *dir,
                                          specdec_drafter **out, specdec_err *err);
/* Prompt lookup: propose the continuation of the longest suffix match (n = max_n..1, 0 = 4)
 * found earlier in the context. No weights. */
specdec_status specdec_drafter_init_ngram(int max_n, specdec_drafter **out, specdec_err *err);
/* By name (the CLI's --draft values): "mtp", "model:DIR", "ngram" / "ngram:N", or "mtp+ngram" /
 * "mtp+ngram:M": the mtp.* module with prompt lookup, a round drafting from the context when its
 * last M or more tokens (default 2) occurred earlier in it, else with the module. */
specdec_status specdec_drafter_init(const specdec_model *target, const char *spec,
                                    specdec_drafter **out, specdec_err *err);
void specdec_drafter_free(specdec_drafter *d);
/* "mtp", "model", "ngram". */
const char *specdec_drafter_name(const specdec_drafter *d);

/* Reduced draft vocabulary (MTP drafter only; opt-in). Reads `path` (draft_vocab.json: {"source",
 * "n", "d2t": [target ids by descending training-corpus frequency], optional "default_n": the
 * measured best prefix}), keeps its first n ids (0 = all; SPECDEC_DRAFT_VOCAB_FILE_DEFAULT = the
 * file's "default_n", else all), and builds once a reduced LM head from those rows of the target's head: each draft step
 * then computes n logits instead of vocab. Drafts are only ever ids of the subset; the target
 * verifies them, so output is unchanged (greedy, seeded and rejection alike). path NULL goes back
 * to the full head. SPECDEC_ERR_UNSUPPORTED for other drafters. Call between generations. */
#define SPECDEC_DRAFT_VOCAB_FILE_DEFAULT (-1)
specdec_status specdec_drafter_set_draft_vocab(specdec_drafter *d, const char *path, int n, specdec_err *err);
/* Ids of the draft vocabulary in use; 0 = the full head. */
int specdec_drafter_draft_vocab_size(const specdec_drafter *d);

typedef enum specdec_spec_sampling {
    SPECDEC_SPEC_REJECTION = 0,  /* standard speculative sampling: target distribution exactly */
    SPECDEC_SPEC_SEEDED = 1      /* per-position Gumbel-max: byte-identical to classic seeded runs */
} specdec_spec_sampling;

typedef struct specdec_spec_params {
    int block_size;              /* K in 2..16 (tokens per verify); 0 = auto (adaptive, 1..8) */
    specdec_spec_sampling sampling;  /* used when temperature > 0; default SPECDEC_SPEC_SEEDED */
    bool allow_inexact;          /* run speculation even when the exactness probe fails (loudly) */
    int probe_draws;             /* random token draws of the block-vs-chain probe (default 3, >= 1) */
    int verify_rows;             /* project at most this many verify rows through the LM head (0 = all):
                                  * the walk then considers only their drafts; output is unchanged (an
                                  * experiment on the cost of an early-exit verify) */
    bool profile;                /* synchronized per-step drafter profile (costs a little time) */
    bool quiet;                  /* no warnings to the log callback (they are still in the stats) */
} specdec_spec_params;

specdec_spec_params specdec_spec_default_params(void);

#define SPECDEC_SPEC_MAX_DEPTH 16

typedef struct specdec_spec_stats {
    specdec_gen_stats gen;           /* the same fields specdec_generate fills; gen.decode_ms is the
                                      * wall time after the prefill minus probe_ms (the one-time
                                      * exactness probe is not decoding; classic has none) */
    bool speculated;                 /* false when speculation was declined (classic ran) */
    int probe;                       /* 1 passed, 0 failed, -1 not run (result was cached: see probe_cached) */
    bool probe_cached;               /* the probe result came from an earlier call on this ctx */
    bool inexact;                    /* probe failed and allow_inexact engaged speculation anyway */
    char note[256];                  /* why speculation was declined / warnings ("" when none) */
    int block_size;                  /* fixed K, or 0 for auto */
    int64_t rounds, drafted, accepted, emitted;
    int64_t projected;               /* verify rows projected through the LM head (= rounds + drafted
                                      * unless verify_rows caps them) */
    int64_t zero_accept_rounds, partial_accept_rounds, full_accept_rounds; /* a round whose drafter
                                       proposed nothing (n-gram miss) counts as zero-accept */
    int64_t drafted_at_depth[SPECDEC_SPEC_MAX_DEPTH + 1];  /* [d]: rounds that drafted depth d (1-based) */
    int64_t accepted_at_depth[SPECDEC_SPEC_MAX_DEPTH + 1]; /* [d]: rounds that accepted depth d */
    int64_t rounds_at_width[SPECDEC_SPEC_MAX_DEPTH + 1];   /* [K]: rounds for which width K was chosen
                                       (the verify covers 1 + the drafts actually proposed) */
    int64_t emitted_at_width[SPECDEC_SPEC_MAX_DEPTH + 1];  /* [K]: tokens those rounds emitted */
    double ms_at_width[SPECDEC_SPEC_MAX_DEPTH + 1];        /* [K]: their wall time (ms), as round_ms
                                       (less the generation's last accept, timed after its round) */
    double tau;                      /* emitted / rounds (bonus included) */
    /* wall time summed over rounds (ms); residual = round - the named phases */
    double round_ms, draft_ms, verify_ms, walk_ms, finalize_ms, accept_ms, residual_ms;
    double prefill_ms, probe_ms, drafter_prefill_ms;
    /* drafter step profile (profile = true): ms summed over draft steps */
    bool profiled;
    int64_t profile_steps;
    double prof_upload_ms, prof_embed_ms, prof_layers_ms, prof_head_ms, prof_sample_ms,
           prof_readback_ms, prof_overhead_ms;
    int auto_width;                  /* auto: the width chosen most often (1 = classic won) */
    int64_t lookup_rounds;           /* mtp+ngram: rounds drafted from the context rather than the module */
} specdec_spec_stats;

/* Speculative decoding with drafter d, mirroring specdec_generate (same parameters, same stop
 * rules, same budget, cancellable through gp->cancel). d may be NULL: classic decoding. */
specdec_status specdec_spec_generate(specdec_ctx *c, specdec_drafter *d, const specdec_tokenizer *tok,
                                     const int32_t *prompt, int n_prompt, const specdec_gen_params *gp,
                                     const specdec_spec_params *sp, int32_t **out_ids, int *n_out,
                                     specdec_spec_stats *stats, specdec_err *err);

/* One-line human summary of stats (tau, acceptance, phases) into buf. */
void specdec_spec_stats_summary(const specdec_spec_stats *s, char *buf, size_t n);
/* Write stats as a JSON object to `path` (keys: tau, rounds, drafted, accepted,
 * acceptance_by_depth, phases_ms, probe, ...). */
specdec_status specdec_spec_stats_write_json(const specdec_spec_stats *s, const char *path,
                                             specdec_err *err);

/* ==== end of speculative decoding ==================================================== */

/* ---- quantizer --------------------------------------------------------------------- */

typedef struct specdec_quantize_params {
    int bits;            /* 4 or 8 */
    int group_size;      /* 32, 64 or 128 */
    bool quantize_embedding;  /* default true */
    bool quantize_mtp;        /* quantize mtp.* linears too (default false: kept as stored) */
    uint64_t max_shard_bytes; /* 0 = one file */
    /* per-tensor report: name, relative RMS error, max abs error */
    void (*report)(const char *name, double rel_rms, double max_abs, void *user);
    void *report_user;
} specdec_quantize_params;

specdec_quantize_params specdec_quantize_default_params(void);

/* Read model directory IN, write a loadable MLX-layout quantized directory OUT (config.json
 * with "quantization", safetensors, and the tokenizer files copied). OUT is written to a
 * temporary sibling and renamed into place: good data is never overwritten with partial output. */
specdec_status specdec_quantize(const char *in_dir, const char *out_dir,
                                const specdec_quantize_params *p, specdec_err *err);

/* ---- inflation: the same function at a bigger shape ------------------------------------ */

/* Whether the inflated model ties its LM head to the embedding. */
typedef enum specdec_inflate_tie {
    SPECDEC_INFLATE_TIE_KEEP = 0,   /* as the source */
    SPECDEC_INFLATE_TIED,           /* tied (needs a tied source: an untied head cannot be folded in) */
    SPECDEC_INFLATE_UNTIED          /* untied; a tied source's embedding becomes a separate lm_head */
} specdec_inflate_tie;

typedef struct specdec_inflate_params {
    /* target shape; 0 = the source's. head_dim and the vocabulary never change. */
    int hidden_size, intermediate_size, n_layers, n_heads, n_kv_heads;
    int head_dim;                  /* 0 = the source's; any other value must equal it (checked) */
    specdec_inflate_tie tie;
    bool fill_zero;                /* zeros instead of pseudo-random values where values do not matter */
    uint64_t seed;                 /* of the pseudo-random fill */
    int bits, group_size;          /* dense sources: quantize the linears on the way (0 = stay dense) */
    bool quantize_mtp;             /* quantize the dense mtp.* linears too (quantized sources: with
                                    * the source's bits and group size) */
    uint64_t max_shard_bytes;      /* default 4 GiB; 0 = one file */
    int n_threads;                 /* 0 = online CPUs */
    specdec_progress_fn progress;  /* bytes of tensor data written / total; may be NULL; false cancels */
    void *progress_user;
} specdec_inflate_params;

specdec_inflate_params specdec_inflate_default_params(void);

/* Set the shape fields of *p to a published Qwen3 shape (head_dim 128): "qwen3-1.7b" (H 2048,
 * I 6144, 28 layers, 16/8 heads, tied), "qwen3-8b" (4096, 12288, 36, 32/8, untied) or
 * "qwen3-32b" (5120, 25600, 64, 64/8, untied). Other fields are left alone. */
specdec_status specdec_inflate_preset(const char *name, specdec_inflate_params *p, specdec_err *err);

/* Read model directory IN and write OUT: a model of the requested shape that computes the same
 * function (target and mtp.* module, dense or quantized, tied or untied): padded attention and KV
 * heads, padded hidden and MLP widths whose contributions are exactly zero, RMSNorm weights
 * rescaled for the wider mean, extra layers whose output projections are zero. Logits equal the
 * source's up to float rounding and the rms_norm_eps bound stated in src/convert/inflate.c.
 * Quantized tensors are inflated in the quantized domain (no re-quantization). A target smaller
 * than the source in any dimension, or another head_dim, is refused naming the dimension. The
 * output is streamed (never the whole model in memory), written to a temporary sibling of OUT and
 * renamed into place; OUT must be absent or empty. */
specdec_status specdec_inflate(const char *in_dir, const char *out_dir, const specdec_inflate_params *p,
                               specdec_err *err);

#ifdef __cplusplus
}
#endif
#endif /* SPECDEC_H */

/*
 * bench_gemm.c — mcir's GEMMs on the GPU, as graphs: for each shape a
 * graph.json with one matmul (and the ops transformers put around it) is
 * written in memory and taken through the pipeline (rewrite, plan, memory
 * plan, generate, NVRTC — timed apart and reported as compile time), then
 * run by the runtime (mcir_gpu_run_bound) with the inputs and outputs
 * resident on the device: warm-up runs, then the median of --reps runs
 * (≥ 20), each after an L2 flush and timed by the runtime's CUDA events
 * around the plan's launches — whatever runs them: cuBLASLt, cuBLAS with
 * a generated epilogue kernel, or a generated template (the `path`).
 *
 * Suites: plain f16 and bf16 products (1024³ … 8192³ and odd sizes:
 * 4095×4097×1000, decode-like 1×4096×4096, 128×12288×4096), A and B both
 * inputs; GEMM + epilogue as transformers write them (GPT-2 c_fc with
 * bias + tanh-GELU, BERT's intermediate with bias + erf-GELU, OPT's fc1
 * with bias + ReLU, GPT-2 c_proj with bias + residual, Llama o_proj with a
 * residual, each over tokens [T, K] and as the block writes it over
 * [B, S, K] with the weight shared across the batch; a Cohere-style LM
 * head scaled and cast to f32); the SwiGLU down projection
 * (silu(gate)·up, then the matmul) at Llama-7B sizes; batched products,
 * true batches and weights shared across a batch; 3x3 pad-1 convs (NCHW,
 * f16 and bf16) with bias + ReLU (one with a residual add before the
 * ReLU, as ResNet's BasicBlock), at shapes the sm_90a implicit GEMM takes
 * (ResNet's 56x56 stage, 112x112, 64x64) and two it cannot (28x28: a row
 * of 56 bytes; a stride-2 conv), the path saying which ran; and products
 * whose A arrives in f32 and is cast to f16 / bf16 first (alone, and
 * cast(silu(gate)·up) with gate and up f32), at Llama-7B sizes, the cost
 * model fusing the cast into the sm_90a GEMM's prologue or not (the path
 * shows which); and Llama's whole gated MLP (gate and up projections,
 * SiLU · up, the down projection; Llama-7B f16 and Llama-3-8B bf16 at 16,
 * 512 and 8192 tokens; its row's N is the intermediate size F, K the model
 * width, TFLOP/s over its three products), once as the cost model plans it
 * and once with the paired epilogue forced (MCIR_GLU=always: the gate and
 * up projections one generated GEMM with SiLU · up in its epilogue, then
 * the down projection). Weights are weights (Linear layers: [N, K], transpose_b;
 * a conv's [O, C, KH, KW] and bias), seeded. TFLOP/s counts 2·B·M·N·K —
 * for a conv 2·N·O·OH·OW·C·KH·KW, its row's B, M, N, K being the images,
 * O, OH·OW and C·KH·KW (the epilogue's and prologue's flops are not
 * counted).
 *
 * Without a GPU it exits 77 with one line saying why; --dry-run instead
 * runs the pipeline for every selected shape (NVRTC for the first
 * --compile N of them) and checks what needs no GPU: every shape plans,
 * its path is named, its modelled time is finite and positive; one CSV
 * row per shape with "not run (no GPU)".
 *
 * usage: bench_gemm [--dry-run] [--suite plain|epilogue|swiglu|batch|conv|cast|mlp|all]
 *          [--match TEXT[,TEXT...]] [--compile N] [--reps N] [--warmup N]
 *          [--arch sm_XX] [--csv FILE]
 * --match keeps the shapes whose name contains any of the texts.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "runtime/runtime-impl.h"   /* mcir_cublaslt_available: the path the runtime takes */

/* What runs around the product, one entry per kind (torch_gemm.py keeps
 * the same names and writes each as PyTorch eager runs it). */
typedef struct epilogue {
    const char *name;
    bool bias;                /* + a [N] weight */
    const char *act;          /* "gelu", "relu" or NULL */
    const char *approximate;  /* gelu's */
    bool residual;            /* + an input of the output's shape */
    double scale;             /* 0: none */
    const char *cast;         /* the output's dtype where it is cast */
    bool swiglu;              /* A = silu(gate) · up, a prologue */
    bool from_f32;            /* A (or gate and up) given in f32, cast to the product's dtype */
    bool mlp;                 /* the whole gated MLP: down(silu(x·Wg) · (x·Wu)); M tokens, N = F, K = D */
    const char *glu;          /* MCIR_GLU for it ("always": the paired epilogue whatever the model says) */
} epilogue;

typedef enum {
    EPI_NONE, EPI_BIAS_GELU_TANH, EPI_BIAS_GELU_ERF, EPI_BIAS_RELU, EPI_BIAS_RESIDUAL, EPI_RESIDUAL,
    EPI_SCALE_CAST, EPI_SWIGLU, EPI_BIAS_RESIDUAL_RELU, EPI_CAST_F32, EPI_SWIGLU_CAST_F32, EPI_MLP, EPI_MLP_GLU
} epilogue_id;

static const epilogue EPILOGUES[] = {
    [EPI_NONE] = {"none"},
    [EPI_BIAS_GELU_TANH] = {"bias_gelu_tanh", .bias = true, .act = "gelu", .approximate = "tanh"},
    [EPI_BIAS_GELU_ERF] = {"bias_gelu_erf", .bias = true, .act = "gelu", .approximate = "none"},
    [EPI_BIAS_RELU] = {"bias_relu", .bias = true, .act = "relu"},
    [EPI_BIAS_RESIDUAL] = {"bias_residual", .bias = true, .residual = true},
    [EPI_RESIDUAL] = {"residual", .residual = true},
    [EPI_SCALE_CAST] = {"scale_cast_f32", .scale = 0.0625, .cast = "f32"},
    [EPI_SWIGLU] = {"silu_mul_prologue", .swiglu = true},
    /* a conv's: (conv + bias + r) then ReLU */
    [EPI_BIAS_RESIDUAL_RELU] = {"bias_residual_relu", .bias = true, .act = "relu", .residual = true},
    [EPI_CAST_F32] = {"cast_f32_prologue", .from_f32 = true},                         /* cast(a) */
    [EPI_SWIGLU_CAST_F32] = {"silu_mul_cast_f32_prologue", .swiglu = true, .from_f32 = true}, /* cast(silu(g)·u) */
    [EPI_MLP] = {"gated_mlp", .mlp = true},                         /* the plan the cost model picks */
    [EPI_MLP_GLU] = {"gated_mlp_glu", .mlp = true, .glu = "always"}, /* the paired epilogue forced */
};

/* A conv2d's dims (o 0: the shape is a product): X [N, C, H, W] (N is
 * the shape's batch), W [O, C, KH, KW], square stride and padding. */
typedef struct conv_dims {
    int64_t c, h, w, o, kh, kw, stride, pad;
} conv_dims;

typedef struct shape {
    const char *suite;
    const char *label;        /* the layer it comes from, or NULL */
    mcir_dtype dtype;
    int64_t batch, m, n, k;   /* batch 1: A [M, K]; else A [batch, M, K] */
    bool trans_b;             /* B [N, K] (a Linear layer's weight) */
    bool shared_b;            /* B has no batch dims: one weight for the batch */
    bool weight_b;            /* B is a weight (else an input) */
    epilogue_id epi;
    conv_dims cv;             /* a conv: batch images, m = O, n = OH·OW, k = C·KH·KW */
} shape;

typedef struct shapes {
    mcir_arena *arena;
    shape *v;
    int n, cap;
} shapes;

static void add(shapes *s, shape x) {
    s->v = mcir_arena_grow(s->arena, s->v, &s->cap, s->n + 1, sizeof *s->v);
    s->v[s->n++] = x;
}

/* A transformer layer's product over T tokens: as [T, K], and (batch > 1)
 * as the block writes it, [batch, T/batch, K] on a shared weight. */
static void layer(shapes *s, const char *label, mcir_dtype dt, int64_t batch, int64_t tokens, int64_t n,
                  int64_t k, bool trans_b, epilogue_id e) {
    add(s, (shape){"epilogue", label, dt, 1, tokens, n, k, trans_b, true, true, e, {0}});
    if (batch > 1) add(s, (shape){"epilogue", label, dt, batch, tokens / batch, n, k, trans_b, true, true, e, {0}});
}

/* A KH x KW conv of N images [C, H, W] to O channels, its GEMM view in
 * batch, m, n, k. */
static void conv(shapes *s, const char *label, mcir_dtype dt, int64_t n_img, int64_t c, int64_t h, int64_t w,
                 int64_t o, int64_t kh, int64_t stride, int64_t pad, epilogue_id e) {
    conv_dims cv = {c, h, w, o, kh, kh, stride, pad};
    int64_t oh = (h + 2 * pad - kh) / stride + 1, ow = (w + 2 * pad - kh) / stride + 1;
    add(s, (shape){"conv", label, dt, n_img, o, oh * ow, c * kh * kh, false, true, true, e, cv});
}

static const char *const SUITES[] = {"plain", "epilogue", "swiglu", "batch", "conv", "cast", "mlp", "all", NULL};

static void sweep(shapes *s, const char *suite) {
    bool all = strcmp(suite, "all") == 0;
    const mcir_dtype dts[] = {MCIR_DTYPE_F16, MCIR_DTYPE_BF16};
    const mcir_dtype F16 = MCIR_DTYPE_F16, BF16 = MCIR_DTYPE_BF16;
    if (all || strcmp(suite, "plain") == 0) {
        const int64_t mnk[][3] = {{1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096}, {8192, 8192, 8192},
                                  {4095, 4097, 1000}, {1, 4096, 4096},    {128, 12288, 4096}};
        for (int t = 0; t < 2; t++)
            for (int i = 0; i < 7; i++)
                add(s, (shape){"plain", NULL, dts[t], 1, mnk[i][0], mnk[i][1], mnk[i][2], false, false, false,
                               EPI_NONE, {0}});
    }
    if (all || strcmp(suite, "epilogue") == 0) {
        layer(s, "gpt2_c_fc", F16, 8, 8192, 3072, 768, false, EPI_BIAS_GELU_TANH);       /* 8 x 1024 tokens */
        layer(s, "bert_intermediate", F16, 8, 4096, 3072, 768, true, EPI_BIAS_GELU_ERF); /* 8 x 512 */
        layer(s, "opt_fc1", F16, 8, 8192, 8192, 2048, true, EPI_BIAS_RELU);              /* OPT-1.3B */
        layer(s, "gpt2_c_proj", F16, 8, 8192, 768, 3072, false, EPI_BIAS_RESIDUAL);
        layer(s, "llama_o_proj", BF16, 4, 8192, 4096, 4096, true, EPI_RESIDUAL);        /* Llama-7B */
        layer(s, "lm_head", BF16, 1, 2048, 32000, 4096, true, EPI_SCALE_CAST);          /* logits * scale, .float() */
    }
    if (all || strcmp(suite, "swiglu") == 0)   /* Llama-7B's down_proj: silu(gate) * up, then W_down */
        for (int t = 0; t < 2; t++)
            for (int64_t tokens = 2048; tokens <= 8192; tokens *= 4)
                add(s, (shape){"swiglu", "llama_down_proj", dts[t], 1, tokens, 4096, 11008, true, true, true,
                               EPI_SWIGLU, {0}});
    if (all || strcmp(suite, "batch") == 0) {
        for (int t = 0; t < 2; t++)
            add(s, (shape){"batch", NULL, dts[t], 64, 512, 512, 512, false, false, false, EPI_NONE, {0}});
        /* attention's products at GPT-2's 8 x 12 heads, seq 1024 */
        add(s, (shape){"batch", "attn_qk", F16, 96, 1024, 1024, 64, true, false, false, EPI_NONE, {0}});
        add(s, (shape){"batch", "attn_pv", F16, 96, 1024, 64, 1024, false, false, false, EPI_NONE, {0}});
        /* a projection on [B, S, H] activations: the weight shared across the batch */
        add(s, (shape){"batch", "gpt2_attn_c_proj", F16, 8, 1024, 768, 768, false, true, true, EPI_NONE, {0}});
        add(s, (shape){"batch", "llama_q_proj", BF16, 4, 2048, 4096, 4096, true, true, true, EPI_NONE, {0}});
    }
    if (all || strcmp(suite, "conv") == 0)   /* 3x3, pad 1, bias + ReLU */
        for (int t = 0; t < 2; t++) {
            /* the sm_90a implicit GEMM's: W and C multiples of 8, stride 1 */
            conv(s, "resnet_layer1", dts[t], 32, 64, 56, 56, 64, 3, 1, 1, EPI_BIAS_RELU);
            conv(s, "resnet_layer1", dts[t], 32, 64, 56, 56, 64, 3, 1, 1, EPI_BIAS_RESIDUAL_RELU);
            conv(s, NULL, dts[t], 32, 128, 56, 56, 128, 3, 1, 1, EPI_BIAS_RELU);
            conv(s, NULL, dts[t], 8, 256, 64, 64, 256, 3, 1, 1, EPI_BIAS_RELU);
            conv(s, NULL, dts[t], 8, 64, 112, 112, 64, 3, 1, 1, EPI_BIAS_RELU);
            /* not its: a row of 28 pixels is 56 bytes (TMA strides are
             * multiples of 16); a stride-2 conv (ResNet's downsampling) */
            conv(s, "resnet_layer2", dts[t], 32, 128, 28, 28, 128, 3, 1, 1, EPI_BIAS_RELU);
            conv(s, "resnet_layer2_down", dts[t], 32, 64, 56, 56, 128, 3, 2, 1, EPI_BIAS_RELU);
        }
    if (all || strcmp(suite, "mlp") == 0) {   /* Llama's gated MLP whole: gate / up, SiLU · up, down */
        const int64_t tok[] = {16, 512, 8192};
        for (int i = 0; i < 3; i++)
            for (int e = 0; e < 2; e++) {
                add(s, (shape){"mlp", "llama7_mlp", F16, 1, tok[i], 11008, 4096, true, true, true,
                               e ? EPI_MLP_GLU : EPI_MLP, {0}});
                add(s, (shape){"mlp", "llama3_8b_mlp", BF16, 1, tok[i], 14336, 4096, true, true, true,
                               e ? EPI_MLP_GLU : EPI_MLP, {0}});
            }
    }
    if (all || strcmp(suite, "cast") == 0) {   /* A arrives in f32 (a norm's output, say); 16: decoding */
        const int64_t tok[] = {16, 64, 512, 8192};
        for (int i = 0; i < 4; i++) {
            int64_t tokens = tok[i];
            add(s, (shape){"cast", "llama_q_proj", BF16, 1, tokens, 4096, 4096, true, true, true, EPI_CAST_F32, {0}});
            add(s, (shape){"cast", "llama_down_proj", BF16, 1, tokens, 4096, 11008, true, true, true,
                           EPI_CAST_F32, {0}});
            add(s, (shape){"cast", "llama_q_proj", F16, 1, tokens, 4096, 4096, true, true, true, EPI_CAST_F32, {0}});
            add(s, (shape){"cast", "llama_down_proj", BF16, 1, tokens, 4096, 11008, true, true, true,
                           EPI_SWIGLU_CAST_F32, {0}});
        }
    }
}

/* suite/dtype[/label][/bB]/mM/nN/kK[/NT][/shared][/epilogue]; a conv's
 * conv/dtype[/label]/nN/cC/hH/wW/oO/kKHxKW/sS/pP[/epilogue] */
static void shape_name(const shape *x, char *buf, size_t n) {
    char lb[48] = "", bt[32] = "", ep[48] = "";
    if (x->label) snprintf(lb, sizeof lb, "/%s", x->label);
    if (x->cv.o) {
        const conv_dims *c = &x->cv;
        snprintf(buf, n, "%s/%s%s/n%lld/c%lld/h%lld/w%lld/o%lld/k%lldx%lld/s%lld/p%lld/%s", x->suite,
                 mcir_dtype_name(x->dtype), lb, (long long)x->batch, (long long)c->c, (long long)c->h,
                 (long long)c->w, (long long)c->o, (long long)c->kh, (long long)c->kw, (long long)c->stride,
                 (long long)c->pad, EPILOGUES[x->epi].name);
        return;
    }
    if (x->batch > 1) snprintf(bt, sizeof bt, "/b%lld", (long long)x->batch);
    if (x->epi != EPI_NONE) snprintf(ep, sizeof ep, "/%s", EPILOGUES[x->epi].name);
    snprintf(buf, n, "%s/%s%s%s/m%lld/n%lld/k%lld%s%s%s", x->suite, mcir_dtype_name(x->dtype), lb, bt,
             (long long)x->m, (long long)x->n, (long long)x->k, x->trans_b ? "/NT" : "",
             x->shared_b && x->batch > 1 ? "/shared" : "", ep);
}

static double flops(const shape *x) {   /* the gated MLP's: its three products */
    return (EPILOGUES[x->epi].mlp ? 3.0 : 1.0) * 2.0 * (double)x->batch * (double)x->m * (double)x->n * (double)x->k;
}

/* "[B, R, C]" or "[R, C]" */
static void dims(char *buf, size_t n, int64_t batch, int64_t r, int64_t c) {
    if (batch > 1) snprintf(buf, n, "[%lld, %lld, %lld]", (long long)batch, (long long)r, (long long)c);
    else snprintf(buf, n, "[%lld, %lld]", (long long)r, (long long)c);
}

/* A conv's graph: input x [N, C, H, W] (and r, the output's shape, for a
 * residual), weights w [O, C, KH, KW] and bias [O]; conv2d(x, w, bias)
 * (+ r) → ReLU; output y. */
static void conv_json(bench_text *t, const shape *x) {
    const epilogue *e = &EPILOGUES[x->epi];
    const conv_dims *c = &x->cv;
    const char *dt = mcir_dtype_name(x->dtype);
    int64_t oh = (c->h + 2 * c->pad - c->kh) / c->stride + 1, ow = (c->w + 2 * c->pad - c->kw) / c->stride + 1;
    long long nb = (long long)x->batch, ci = (long long)c->c, o = (long long)c->o, st = (long long)c->stride,
              p = (long long)c->pad;
    bench_text_printf(t, "{\"mcir\": 1, \"name\": \"conv\", \"inputs\": [{\"name\": \"x\", \"dtype\": \"%s\", "
                         "\"shape\": [%lld, %lld, %lld, %lld]}",
                      dt, nb, ci, (long long)c->h, (long long)c->w);
    if (e->residual)
        bench_text_printf(t, ", {\"name\": \"r\", \"dtype\": \"%s\", \"shape\": [%lld, %lld, %lld, %lld]}", dt, nb, o,
                          (long long)oh, (long long)ow);
    bench_text_printf(t, "],\n \"weights\": [{\"name\": \"w\", \"dtype\": \"%s\", "
                         "\"shape\": [%lld, %lld, %lld, %lld]}, "
                         "{\"name\": \"bias\", \"dtype\": \"%s\", \"shape\": [%lld]}],\n \"nodes\": [\n",
                      dt, o, ci, (long long)c->kh, (long long)c->kw, dt, o);
    bench_text_printf(t, "  {\"name\": \"conv\", \"op\": \"conv2d\", \"inputs\": [\"x\", \"w\", \"bias\"], "
                         "\"outputs\": [\"c\"], \"attrs\": {\"strides\": [%lld, %lld], "
                         "\"pads\": [%lld, %lld, %lld, %lld]}},\n",
                      st, st, p, p, p, p);
    if (e->residual)
        bench_text_printf(t, "  {\"name\": \"res\", \"op\": \"add\", \"inputs\": [\"c\", \"r\"], "
                             "\"outputs\": [\"s\"]},\n");
    bench_text_printf(t, "  {\"name\": \"act\", \"op\": \"relu\", \"inputs\": [\"%s\"], \"outputs\": [\"y\"]}\n ],\n"
                         " \"outputs\": [\"y\"]}\n",
                      e->residual ? "s" : "c");
}

/* The graph: inputs a (or gate and up; f32 where the prologue casts), b
 * where it is not a weight, r (residual); weights w (B) and bias; nodes
 * prologue (→ cast) → matmul → bias → activation → residual → scale →
 * cast; output y. */
/* The gated MLP: input x [M, K]; weights wg, wu [N, K], wd [K, N] (Linear
 * layers); y = (silu(x·wgᵀ) · (x·wuᵀ))·wdᵀ, SiLU written as the models'
 * exports write it (x · sigmoid(x)) */
static void mlp_json(bench_text *t, const shape *x) {
    const char *dt = mcir_dtype_name(x->dtype);
    const long long m = (long long)x->m, f = (long long)x->n, d = (long long)x->k;
    bench_text_printf(t, "{\"mcir\": 1, \"name\": \"mlp\", \"inputs\": [{\"name\": \"x\", \"dtype\": \"%s\", "
                         "\"shape\": [%lld, %lld]}],\n \"weights\": [{\"name\": \"wg\", \"dtype\": \"%s\", "
                         "\"shape\": [%lld, %lld]}, {\"name\": \"wu\", \"dtype\": \"%s\", \"shape\": [%lld, %lld]}, "
                         "{\"name\": \"wd\", \"dtype\": \"%s\", \"shape\": [%lld, %lld]}],\n \"nodes\": [\n",
                      dt, m, d, dt, f, d, dt, f, d, dt, d, f);
    bench_text_printf(t, "  {\"name\": \"gate\", \"op\": \"matmul\", \"inputs\": [\"x\", \"wg\"], \"outputs\": [\"g\"], "
                         "\"attrs\": {\"transpose_b\": true}},\n"
                         "  {\"name\": \"up\", \"op\": \"matmul\", \"inputs\": [\"x\", \"wu\"], \"outputs\": [\"u\"], "
                         "\"attrs\": {\"transpose_b\": true}},\n"
                         "  {\"name\": \"sig\", \"op\": \"sigmoid\", \"inputs\": [\"g\"], \"outputs\": [\"sg\"]},\n"
                         "  {\"name\": \"silu\", \"op\": \"mul\", \"inputs\": [\"g\", \"sg\"], \"outputs\": [\"a\"]},\n"
                         "  {\"name\": \"gate_up\", \"op\": \"mul\", \"inputs\": [\"a\", \"u\"], \"outputs\": [\"h\"]},\n"
                         "  {\"name\": \"down\", \"op\": \"matmul\", \"inputs\": [\"h\", \"wd\"], \"outputs\": [\"y\"], "
                         "\"attrs\": {\"transpose_b\": true}}\n ],\n \"outputs\": [\"y\"]}\n");
}

static void graph_json(bench_text *t, const shape *x) {
    const epilogue *e = &EPILOGUES[x->epi];
    if (x->cv.o) {
        conv_json(t, x);
        return;
    }
    if (e->mlp) {
        mlp_json(t, x);
        return;
    }
    const char *dt = mcir_dtype_name(x->dtype), *at = e->from_f32 ? "f32" : dt;   /* at: A's as given */
    char as[64], bs[64], ys[64];
    dims(as, sizeof as, x->batch, x->m, x->k);
    dims(bs, sizeof bs, x->shared_b ? 1 : x->batch, x->trans_b ? x->n : x->k, x->trans_b ? x->k : x->n);
    dims(ys, sizeof ys, x->batch, x->m, x->n);
    bench_text_printf(t, "{\"mcir\": 1, \"name\": \"gemm\", \"inputs\": [");
    if (e->swiglu)
        bench_text_printf(t, "{\"name\": \"gate\", \"dtype\": \"%s\", \"shape\": %s}, "
                             "{\"name\": \"up\", \"dtype\": \"%s\", \"shape\": %s}", at, as, at, as);
    else
        bench_text_printf(t, "{\"name\": \"a\", \"dtype\": \"%s\", \"shape\": %s}", at, as);
    if (!x->weight_b) bench_text_printf(t, ", {\"name\": \"b\", \"dtype\": \"%s\", \"shape\": %s}", dt, bs);
    if (e->residual) bench_text_printf(t, ", {\"name\": \"r\", \"dtype\": \"%s\", \"shape\": %s}", dt, ys);
    bench_text_printf(t, "],\n \"weights\": [");
    if (x->weight_b) bench_text_printf(t, "{\"name\": \"w\", \"dtype\": \"%s\", \"shape\": %s}", dt, bs);
    if (e->bias)
        bench_text_printf(t, "%s{\"name\": \"bias\", \"dtype\": \"%s\", \"shape\": [%lld]}", x->weight_b ? ", " : "",
                          dt, (long long)x->n);
    bench_text_printf(t, "],\n \"nodes\": [\n");
    char cur[8] = "a";   /* the value the next node reads */
    if (e->swiglu) {
        bench_text_printf(t, "  {\"name\": \"silu\", \"op\": \"silu\", \"inputs\": [\"gate\"], "
                             "\"outputs\": [\"sg\"]},\n"
                             "  {\"name\": \"mul\", \"op\": \"mul\", \"inputs\": [\"sg\", \"up\"], "
                             "\"outputs\": [\"h\"]},\n");
        snprintf(cur, sizeof cur, "h");
    }
    if (e->from_f32) {
        bench_text_printf(t, "  {\"name\": \"cast_a\", \"op\": \"cast\", \"inputs\": [\"%s\"], \"outputs\": [\"ac\"], "
                             "\"attrs\": {\"to\": \"%s\"}},\n", cur, dt);
        snprintf(cur, sizeof cur, "ac");
    }
    /* the chain after the prologue: each step's op and its second input */
    typedef struct step {
        const char *op, *other;
    } step;
    step steps[6];
    int n = 0;
    steps[n++] = (step){"matmul", x->weight_b ? "w" : "b"};
    if (e->bias) steps[n++] = (step){"add", "bias"};
    if (e->act) steps[n++] = (step){e->act, NULL};
    if (e->residual) steps[n++] = (step){"add", "r"};
    if (e->scale) steps[n++] = (step){"scale", NULL};
    if (e->cast) steps[n++] = (step){"cast", NULL};
    for (int i = 0; i < n; i++) {
        const char *op = steps[i].op;
        char out[8] = "y", attrs[128] = "", ins[64];
        if (i < n - 1) snprintf(out, sizeof out, "t%d", i);
        if (i == 0)
            snprintf(attrs, sizeof attrs, ", \"attrs\": {\"transpose_b\": %s}", x->trans_b ? "true" : "false");
        else if (strcmp(op, "gelu") == 0)
            snprintf(attrs, sizeof attrs, ", \"attrs\": {\"approximate\": \"%s\"}", e->approximate);
        else if (strcmp(op, "scale") == 0)
            snprintf(attrs, sizeof attrs, ", \"attrs\": {\"value\": %.17g}", e->scale);
        else if (strcmp(op, "cast") == 0)
            snprintf(attrs, sizeof attrs, ", \"attrs\": {\"to\": \"%s\"}", e->cast);
        if (steps[i].other) snprintf(ins, sizeof ins, "\"%s\", \"%s\"", cur, steps[i].other);
        else snprintf(ins, sizeof ins, "\"%s\"", cur);
        bench_text_printf(t, "  {\"name\": \"%s_%d\", \"op\": \"%s\", \"inputs\": [%s], \"outputs\": [\"%s\"]%s}%s\n",
                          op, i, op, ins, out, attrs, i == n - 1 ? "" : ",");
        snprintf(cur, sizeof cur, "%s", out);
    }
    bench_text_printf(t, " ],\n \"outputs\": [\"y\"]}\n");
}

/* What runs kernel k where the runtime has (blas) cuBLAS and (lt)
 * cuBLASLt: "cuBLASLt", "cuBLAS+epilogue" (the f32 product staged for a
 * generated epilogue kernel), "cuBLAS", or the generated template
 * ("matmul.wgmma" for the sm_90a GEMM, "matmul.mma" / "matmul.fma" for
 * the others; a conv's "conv2d.wgmma" for the sm_90a TMA + wgmma implicit
 * GEMM, "conv2d.mma" / "conv2d.fma" for the im2col one; else the
 * template's name). */
static const char *kernel_path(const mcir_plan *p, const mcir_kernel_plan *k, bool blas, bool lt,
                               mcir_kernel_cost *c) {
    mcir_cost_options o = {.generated_only = !blas, .no_cublaslt = !lt};
    mcir_cost_kernel(k, p->target, &o, c);
    if (c->library && strcmp(c->library, "cublasLt") == 0) return "cuBLASLt";
    if (c->library) return c->staging_bytes > 0 ? "cuBLAS+epilogue" : "cuBLAS";
    bool conv = k->tpl == MCIR_TEMPLATE_CONV2D;
    for (int i = 0; i < k->tiling.n_dims; i++)   /* the sm_90a template: its warp groups */
        if (strcmp(k->tiling.dim_names[i], "wg") == 0) return conv ? "conv2d.wgmma" : "matmul.wgmma";
    mcir_gemm_problem g;
    if (mcir_gemm_problem_of(k, &g))
        return conv ? (g.mma ? "conv2d.mma" : "conv2d.fma") : g.mma ? "matmul.mma" : "matmul.fma";
    return mcir_template_name(k->tpl);
}

/* The plan's kernels in order ("elementwise then cuBLAS"), their modelled
 * time and launches. */
static void plan_path(const mcir_plan *p, bool blas, bool lt, char *path, size_t n, double *modelled_us,
                      int *launches) {
    path[0] = 0;
    *modelled_us = 0;
    *launches = 0;
    size_t len = 0;
    for (int i = 0; i < p->n_kernels; i++) {
        const mcir_kernel_plan *k = &p->kernels[i];
        if (k->tpl == MCIR_TEMPLATE_ALIAS) continue;
        mcir_kernel_cost c;
        const char *what = kernel_path(p, k, blas, lt, &c);
        *modelled_us += c.modelled_us;
        *launches += c.launches;
        int w = snprintf(path + len, n - len, "%s%s", len ? " then " : "", what);
        if (w > 0) len += (size_t)w < n - len ? (size_t)w : n - len - 1;
    }
}

static const char USAGE[] =
    "usage: bench_gemm [--dry-run] [--suite plain|epilogue|swiglu|batch|conv|cast|mlp|all] [--match TEXT[,TEXT...]]\n"
    "         [--compile N] [--reps N] [--warmup N] [--arch sm_XX] [--csv FILE]\n";

int main(int argc, char **argv) {
    bench_args o;
    int st = bench_args_parse(&o, "bench_gemm", SUITES, USAGE, argc, argv);
    if (st >= 0) return st;
    const char *suite = o.suite, *match = o.match;
    shapes s = {.arena = mcir_arena_new()};
    sweep(&s, suite);
    int selected = 0;
    for (int i = 0; i < s.n; i++) {
        char nm[200];
        shape_name(&s.v[i], nm, sizeof nm);
        selected += bench_match(nm, match);
    }
    if (selected == 0) {
        fprintf(stderr, "bench_gemm: no shape of suite %s matches '%s'\n", suite, match ? match : "");
        mcir_arena_free(s.arena);
        return 2;
    }
    bench_sweep w;
    st = bench_sweep_open(&w, "bench_gemm", &o);
    if (st >= 0) {
        mcir_arena_free(s.arena);
        return st;
    }
    bench_gpu *g = &w.gpu;
    bool gpu = w.on_gpu;
    FILE *csv = w.csv;
    /* which libraries the runtime will find: the path it takes (a dry run
     * names the path where both load) */
    char why[256];
    bool blas = !gpu || mcir_cublas_available(why, sizeof why);
    bool lt = !gpu || (blas && mcir_cublaslt_available(why, sizeof why));
    if (gpu)
        fprintf(stderr, "bench_gemm: %s\n", lt     ? "cuBLAS and cuBLASLt load"
                                              : blas ? "cuBLAS loads, cuBLASLt does not: no library epilogues"
                                                     : "no cuBLAS: generated kernels only");

    fprintf(csv, "suite,impl,name,dtype,M,N,K,batch,layout,epilogue,path,launches,pipeline_s,compile_s,"
                 "compile_cache,median_us,min_us,tflops,modelled_us,device,status\n");
    mcir_diag d = mcir_diag_stderr();
    int failures = 0;
    for (int i = 0; i < s.n; i++) {
        const shape *x = &s.v[i];
        char nm[200];
        shape_name(x, nm, sizeof nm);
        if (!bench_match(nm, match)) continue;
        bench_text json = {0};
        graph_json(&json, x);
        bench_graph b;
        /* the gated MLP's variant with the paired epilogue forced (the rule
         * reads MCIR_GLU as it runs): set for this build only */
        const char *glu = EPILOGUES[x->epi].glu, *was = getenv("MCIR_GLU");
        char *saved = was ? strdup(was) : NULL;
        if (glu) setenv("MCIR_GLU", glu, 1);
        bool ok = bench_sweep_build(&w, &b, json.s, nm, &d);
        if (glu) {
            if (saved) setenv("MCIR_GLU", saved, 1);
            else unsetenv("MCIR_GLU");
        }
        free(saved);
        bench_text_free(&json);
        char path[256] = "", status[600];
        double modelled = 0;
        int launches = 0;
        if (ok) plan_path(b.plan, blas, lt, path, sizeof path, &modelled, &launches);
        bench_gpu_timing t = {0};
        if (!ok) snprintf(status, sizeof status, "pipeline failed");
        else if (bench_graph_kernel(&b, x->cv.o ? MCIR_TEMPLATE_CONV2D : MCIR_TEMPLATE_MATMUL) < 0)
            snprintf(status, sizeof status, "no %s kernel in the plan", x->cv.o ? "conv2d" : "matmul");
        else if (!(isfinite(modelled) && modelled > 0))
            snprintf(status, sizeof status, "modelled time %g us: not finite and positive", modelled);
        else if (!gpu) snprintf(status, sizeof status, "not run (no GPU)");
        else if ((double)bench_graph_device_bytes(&b) > 0.8 * (double)g->total_bytes)
            snprintf(status, sizeof status, "not run (needs %lld bytes)", (long long)bench_graph_device_bytes(&b));
        else if (!bench_time_graph(g, &b, o.warmup, o.reps, &t, status, sizeof status)) ok = false;
        if (!ok || (strncmp(status, "not run", 7) != 0 && strncmp(status, "ok", 2) != 0)) failures++;
        char comp[32], cache[16];
        bench_compile_cells(&b, comp, cache);
        char med[32] = "", mn[32] = "", tf[32] = "";
        if (t.reps) {
            snprintf(med, sizeof med, "%.2f", t.median_ms * 1e3);
            snprintf(mn, sizeof mn, "%.2f", t.min_ms * 1e3);
            snprintf(tf, sizeof tf, "%.2f", flops(x) / (t.median_ms * 1e-3) / 1e12);
        }
        bench_csv_cell(status);
        char layout[16];   /* a conv's: its image layout */
        snprintf(layout, sizeof layout, "%s%s", x->cv.o ? "NCHW" : x->trans_b ? "NT" : "NN",
                 !x->cv.o && x->shared_b && x->batch > 1 ? "/shared" : "");
        fprintf(csv, "%s,mcir,%s,%s,%lld,%lld,%lld,%lld,%s,%s,%s,%d,%.4f,%s,%s,%s,%s,%s,%.2f,%s,%s\n", x->suite, nm,
                mcir_dtype_name(x->dtype), (long long)x->m, (long long)x->n, (long long)x->k, (long long)x->batch,
                layout, EPILOGUES[x->epi].name,
                path, launches, b.pipeline_s, comp, cache, med, mn, tf, modelled, gpu ? g->name : "", status);
        fflush(csv);
        if (!w.csv_file.to_stdout && t.reps)
            printf("%-62s %10.1f us %7.1f TFLOP/s  (modelled %.1f us; %s)\n", nm, t.median_ms * 1e3,
                   flops(x) / (t.median_ms * 1e-3) / 1e12, modelled, path);
        bench_graph_free(&b);
    }
    if (!bench_sweep_close(&w)) failures++;
    mcir_arena_free(s.arena);
    return failures ? 1 : 0;
}

/*
 * test_gpu.c — GPU against the CPU reference interpreter: every bundled
 * example (examples/NAME/graph.json, with the inputs examples/index.json
 * names, other inputs seeded), planned by the kernel planner (or one
 * kernel per node where the planner is not built in), compiled for the
 * device, run in each allocation mode (pool, lazy, eager) and once more
 * with cuBLAS disabled (generated matmul kernels); plus targeted
 * graphs for the templates' edge cases (attention with odd Nq/Nk, causal,
 * masks, head dims 80 and 256; wide norms; conv/pool; matmul epilogues).
 * Outputs must match: max |gpu - cpu| / max(|cpu|) within 1e-3 for f32,
 * 2e-2 for f16/bf16. Out of device memory must fail with what was asked
 * and what was free. Sessions with CUDA graphs (captured at the first
 * step, replayed with new inputs) match the CPU at every step. Graphs with
 * symbolic dims compile once and match the CPU at three sizes. Exits 77
 * where no GPU / driver is present.
 */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "runtime/runtime.h"
#include "codegen_util.h"
#include "test_util.h"

#ifdef MCIR_HAVE_KERNELPLAN
static const bool have_planner = true;
#else
static const bool have_planner = false;
#endif

static char cache_dir[256];

typedef struct planned {
    mcir_plan *plan;
    mcir_memplan *mem;
    bool own;   /* from the real planner: free with mcir_plan_free */
} planned;

static planned plan_graph(mcir_graph *g, mcir_diag *d) {
    planned r = {0};
#ifdef MCIR_HAVE_KERNELPLAN
    r.plan = mcir_plan_build(g, mcir_target_find("sm_90"), NULL, d);
    if (r.plan) {
        r.mem = mcir_memplan_build(r.plan, NULL, NULL, d);
        r.own = true;
        return r;
    }
#endif
    (void)d;
    r.plan = cgt_plan_naive(g, "sm_90");
    return r;
}

static void planned_free(planned *r) {
#ifdef MCIR_HAVE_KERNELPLAN
    if (r->own) {
        if (r->mem) mcir_memplan_free(r->mem);
        mcir_plan_free(r->plan);
    }
#endif
    (void)r;
}

static double tolerance(mcir_dtype t) { return t == MCIR_DTYPE_F32 ? 1e-3 : 2e-2; }

/* Compares every graph output of gpu against cpu; prints the error. */
static bool outputs_match(const mcir_graph *g, mcir_env *cpu, mcir_env *gpu, const char *what) {
    bool ok = true;
    for (int i = 0; i < g->n_outputs; i++) {
        const mcir_tensor *t = g->outputs[i];
        const float *c = mcir_env_get(cpu, t), *v = mcir_env_get(gpu, t);
        if (!c || !v) {
            fprintf(stderr, "%s: output %s missing\n", what, t->name);
            ok = false;
            continue;
        }
        double maxref = 0, maxerr = 0;
        int64_t n = mcir_tensor_numel(t), worst = 0;
        for (int64_t j = 0; j < n; j++) {
            if (fabs(c[j]) > maxref) maxref = fabs(c[j]);
            double e = fabs((double)c[j] - (double)v[j]);
            if (isnan(v[j]) != isnan(c[j])) e = INFINITY;
            if (e > maxerr) { maxerr = e; worst = j; }
        }
        double rel = maxerr / (maxref > 1e-6 ? maxref : 1e-6);
        bool good = rel <= tolerance(t->dtype);
        fprintf(stderr, "  %-40s %-10s %s max err %.3g (rel %.3g, at %lld: cpu %g gpu %g)\n", what, t->name,
                good ? "ok  " : "FAIL", maxerr, rel, (long long)worst, c[worst], v[worst]);
        ok = ok && good;
    }
    return ok;
}

/* Seeds every input (seed 7) the same way in both envs, or loads it. */
static void set_inputs(const mcir_graph *g, mcir_env *a, mcir_env *b, json_t *inputs, const char *exdir) {
    for (int i = 0; i < g->n_inputs; i++) {
        const mcir_tensor *t = g->inputs[i];
        json_t *path = inputs ? json_object_get(inputs, t->name) : NULL;
        if (path && json_is_string(path)) {
            char full[1024];
            snprintf(full, sizeof full, "%s/%s", exdir, json_string_value(path));
            mcir_npy npy;
            mcir_diag d = mcir_diag_stderr();
            if (mcir_npy_read(full, &npy, &d)) {
                mcir_env_set_raw(a, t, npy.data);
                mcir_env_set_raw(b, t, npy.data);
                mcir_npy_free(&npy);
                continue;
            }
        }
        float *v = malloc(sizeof(float) * (size_t)mcir_tensor_numel(t));
        mcir_fill_seeded(t, 7, v);
        mcir_env_set(a, t, v);
        mcir_env_set(b, t, v);
        free(v);
    }
}

static bool check_graph(mcir_graph *g, const char *what, json_t *inputs, const char *exdir) {
    mcir_diag d = mcir_diag_stderr();
    planned pl = plan_graph(g, &d);
    ck_assert_ptr_nonnull(pl.plan);
    mcir_codegen *cg = mcir_codegen_new(pl.plan, pl.mem, &d);
    ck_assert_msg(cg != NULL, "%s: codegen failed", what);
    mcir_env *cpu = mcir_env_new(g, 7);
    ck_assert(cpu != NULL);
    bool ok = true;
    static const mcir_alloc_mode modes[] = {MCIR_ALLOC_POOL, MCIR_ALLOC_LAZY, MCIR_ALLOC_EAGER,
                                            MCIR_ALLOC_POOL};
    mcir_env *gpu0 = mcir_env_new(g, 7);
    set_inputs(g, cpu, gpu0, inputs, exdir);
    mcir_env_free(gpu0);
    ck_assert(mcir_interp_run(g, cpu, &d));
    /* pool, lazy, eager with cuBLAS where it loads; pool again with the
     * generated matmul kernels only */
    for (int m = 0; m < 4; m++) {
        if (m == 3) setenv("MCIR_NO_CUBLAS", "1", 1);
        mcir_env *gpu = mcir_env_new(g, 7);
        mcir_env *dummy = mcir_env_new(g, 7);
        set_inputs(g, gpu, dummy, inputs, exdir);
        mcir_env_free(dummy);
        mcir_gpu_stats st;
        char label[200];
        snprintf(label, sizeof label, "%s [%s%s]", what, mcir_alloc_mode_name(modes[m]),
                 m == 3 ? ", no cuBLAS" : "");
        if (!mcir_gpu_run(cg, gpu, modes[m], &st, &d)) {
            fprintf(stderr, "%s: GPU run failed\n", label);
            ok = false;
        } else {
            fprintf(stderr, "%s on %s: %.3f ms, peak %lld bytes\n", label, st.device_name, st.elapsed_ms,
                    (long long)st.peak_device_bytes);
            ok = outputs_match(g, cpu, gpu, label) && ok;
        }
        mcir_env_free(gpu);
    }
    unsetenv("MCIR_NO_CUBLAS");
    mcir_env_free(cpu);
    mcir_codegen_free(cg);
    planned_free(&pl);
    return ok;
}

START_TEST(test_examples_match_cpu) {
    char dir[1024], path[1400];
    snprintf(dir, sizeof dir, "%s/examples", test_source_dir());
    snprintf(path, sizeof path, "%s/index.json", dir);
    json_t *index = json_load_file(path, 0, NULL);
    DIR *dd = opendir(dir);
    ck_assert_ptr_nonnull(dd);
    struct dirent *e;
    int count = 0, failed = 0;
    fprintf(stderr, "planner: %s\n", have_planner ? "kernelplan" : "one kernel per node");
    while ((e = readdir(dd))) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s/graph.json", dir, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        fclose(f);
        mcir_diag d = mcir_diag_stderr();
        mcir_graph *g = mcir_graph_read_json(path, &d);
        ck_assert_msg(g != NULL, "cannot read %s", path);
        json_t *entry = index ? json_object_get(index, e->d_name) : NULL;
        json_t *inputs = entry ? json_object_get(entry, "inputs") : NULL;
        if (!check_graph(g, e->d_name, inputs, dir)) failed++;
        count++;
        mcir_graph_free(g);
    }
    closedir(dd);
    json_decref(index);
    ck_assert_int_gt(count, 0);
    ck_assert_int_eq(failed, 0);
}
END_TEST

/* Edge cases of the templates, small enough for the CPU reference. */
static const char *const EDGE[] = {
    /* attention: odd sizes, causal with Nk > Nq, head dim 80, f16 and f32 */
    "{\"mcir\":1,\"name\":\"att_c80\",\"inputs\":[{\"name\":\"q\",\"dtype\":\"f16\",\"shape\":[2,3,77,80]},"
    "{\"name\":\"k\",\"dtype\":\"f16\",\"shape\":[2,3,196,80]},{\"name\":\"v\",\"dtype\":\"f16\",\"shape\":[2,3,196,80]}],"
    "\"nodes\":[{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\"],\"outputs\":[\"y\"],\"attrs\":{\"causal\":true}}],"
    "\"outputs\":[\"y\"]}",
    "{\"mcir\":1,\"name\":\"att_m256\",\"inputs\":[{\"name\":\"q\",\"dtype\":\"bf16\",\"shape\":[1,2,77,256]},"
    "{\"name\":\"k\",\"dtype\":\"bf16\",\"shape\":[1,2,196,256]},{\"name\":\"v\",\"dtype\":\"bf16\",\"shape\":[1,2,196,256]},"
    "{\"name\":\"m\",\"dtype\":\"bf16\",\"shape\":[1,1,77,196]}],"
    "\"nodes\":[{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\",\"m\"],\"outputs\":[\"y\"]}],"
    "\"outputs\":[\"y\"]}",
    "{\"mcir\":1,\"name\":\"att_f32\",\"inputs\":[{\"name\":\"q\",\"dtype\":\"f32\",\"shape\":[2,5,33,40]},"
    "{\"name\":\"k\",\"dtype\":\"f32\",\"shape\":[2,5,20,40]},{\"name\":\"v\",\"dtype\":\"f32\",\"shape\":[2,5,20,24]}],"
    "\"nodes\":[{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\"],\"outputs\":[\"y\"],\"attrs\":{\"causal\":true}}],"
    "\"outputs\":[\"y\"]}",
    /* the sm_90a attention kernel (two consumer groups, setmaxnreg): causal
     * with Nk > Nq, a bf16 mask (its producer at 40 registers: 32 hung on an
     * H200), GQA 4:1 through broadcast K/V heads */
    "{\"mcir\":1,\"name\":\"att90_causal\",\"inputs\":[{\"name\":\"q\",\"dtype\":\"f16\",\"shape\":[2,4,200,128]},"
    "{\"name\":\"k\",\"dtype\":\"f16\",\"shape\":[2,4,333,128]},{\"name\":\"v\",\"dtype\":\"f16\",\"shape\":[2,4,333,128]}],"
    "\"nodes\":[{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\"],\"outputs\":[\"y\"],\"attrs\":{\"causal\":true}}],"
    "\"outputs\":[\"y\"]}",
    "{\"mcir\":1,\"name\":\"att90_mask\",\"inputs\":[{\"name\":\"q\",\"dtype\":\"bf16\",\"shape\":[1,4,150,64]},"
    "{\"name\":\"k\",\"dtype\":\"bf16\",\"shape\":[1,4,264,64]},{\"name\":\"v\",\"dtype\":\"bf16\",\"shape\":[1,4,264,64]},"
    "{\"name\":\"m\",\"dtype\":\"bf16\",\"shape\":[1,1,150,264]}],"
    "\"nodes\":[{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\",\"m\"],\"outputs\":[\"y\"]}],"
    "\"outputs\":[\"y\"]}",
    "{\"mcir\":1,\"name\":\"att90_gqa\",\"inputs\":[{\"name\":\"q\",\"dtype\":\"f16\",\"shape\":[1,2,4,130,128]},"
    "{\"name\":\"k\",\"dtype\":\"f16\",\"shape\":[1,2,1,190,128]},{\"name\":\"v\",\"dtype\":\"f16\",\"shape\":[1,2,1,190,128]}],"
    "\"nodes\":[{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\"],\"outputs\":[\"y\"],\"attrs\":{\"causal\":true}}],"
    "\"outputs\":[\"y\"]}",
    /* the norms' 16-byte paths: an f16 layernorm with a GELU epilogue, a
     * bf16 rmsnorm of a sum, an f16 softmax (vectors of 8 in and out) */
    "{\"mcir\":1,\"name\":\"norm16\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f16\",\"shape\":[96,1024]},"
    "{\"name\":\"r\",\"dtype\":\"bf16\",\"shape\":[40,4096]},{\"name\":\"s\",\"dtype\":\"bf16\",\"shape\":[40,4096]},"
    "{\"name\":\"z\",\"dtype\":\"f16\",\"shape\":[50,2048]}],"
    "\"weights\":[{\"name\":\"g\",\"dtype\":\"f16\",\"shape\":[1024]},{\"name\":\"b\",\"dtype\":\"f16\",\"shape\":[1024]},"
    "{\"name\":\"h\",\"dtype\":\"bf16\",\"shape\":[4096]}],"
    "\"nodes\":[{\"name\":\"ln\",\"op\":\"layernorm\",\"inputs\":[\"x\",\"g\",\"b\"],\"outputs\":[\"l\"]},"
    "{\"name\":\"ge\",\"op\":\"gelu\",\"inputs\":[\"l\"],\"outputs\":[\"y1\"]},"
    "{\"name\":\"ad\",\"op\":\"add\",\"inputs\":[\"r\",\"s\"],\"outputs\":[\"rs\"]},"
    "{\"name\":\"rn\",\"op\":\"rmsnorm\",\"inputs\":[\"rs\",\"h\"],\"outputs\":[\"y2\"]},"
    "{\"name\":\"sm\",\"op\":\"softmax\",\"inputs\":[\"z\"],\"outputs\":[\"y3\"]}],"
    "\"outputs\":[\"y1\",\"y2\",\"y3\"]}",
    /* norms, wide rows */
    "{\"mcir\":1,\"name\":\"wide\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[3,262144]},"
    "{\"name\":\"g\",\"dtype\":\"f32\",\"shape\":[262144]}],"
    "\"nodes\":[{\"name\":\"sm\",\"op\":\"softmax\",\"inputs\":[\"x\"],\"outputs\":[\"y1\"]},"
    "{\"name\":\"ln\",\"op\":\"layernorm\",\"inputs\":[\"x\",\"g\"],\"outputs\":[\"y2\"]},"
    "{\"name\":\"rn\",\"op\":\"rmsnorm\",\"inputs\":[\"x\",\"g\"],\"outputs\":[\"y3\"]}],"
    "\"outputs\":[\"y1\",\"y2\",\"y3\"]}",
    /* conv + pools + reductions + copies */
    "{\"mcir\":1,\"name\":\"misc\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[2,6,15,17]},"
    "{\"name\":\"w\",\"dtype\":\"f32\",\"shape\":[8,3,3,3]},{\"name\":\"cb\",\"dtype\":\"f32\",\"shape\":[8]}],"
    "\"nodes\":[{\"name\":\"cv\",\"op\":\"conv2d\",\"inputs\":[\"x\",\"w\",\"cb\"],\"outputs\":[\"c\"],"
    "\"attrs\":{\"strides\":[2,1],\"pads\":[1,1,1,1],\"dilations\":[1,2],\"groups\":2}},"
    "{\"name\":\"re\",\"op\":\"relu\",\"inputs\":[\"c\"],\"outputs\":[\"cr\"]},"
    "{\"name\":\"mp\",\"op\":\"max_pool2d\",\"inputs\":[\"cr\"],\"outputs\":[\"p1\"],\"attrs\":{\"kernel\":[3,3],\"strides\":[2,2],\"pads\":[1,1,1,1]}},"
    "{\"name\":\"ap\",\"op\":\"avg_pool2d\",\"inputs\":[\"cr\"],\"outputs\":[\"p2\"],\"attrs\":{\"kernel\":[2,3],\"pads\":[1,1,0,1]}},"
    "{\"name\":\"gp\",\"op\":\"global_avg_pool\",\"inputs\":[\"cr\"],\"outputs\":[\"p3\"]},"
    "{\"name\":\"rs\",\"op\":\"reduce_sum\",\"inputs\":[\"x\"],\"outputs\":[\"s1\"],\"attrs\":{\"axes\":[1,3]}},"
    "{\"name\":\"rx\",\"op\":\"reduce_max\",\"inputs\":[\"x\"],\"outputs\":[\"s3\"],\"attrs\":{\"axes\":[0,2],\"keepdims\":false}},"
    "{\"name\":\"t2\",\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"xt\"],\"attrs\":{\"perm\":[0,1,3,2]}},"
    "{\"name\":\"sl\",\"op\":\"slice\",\"inputs\":[\"x\"],\"outputs\":[\"xs\"],\"attrs\":{\"axis\":2,\"start\":-2,\"end\":1,\"step\":-3}},"
    "{\"name\":\"sp\",\"op\":\"split\",\"inputs\":[\"x\"],\"outputs\":[\"xa\",\"xb\"],\"attrs\":{\"axis\":1,\"sizes\":[2,4]}},"
    "{\"name\":\"cc\",\"op\":\"concat\",\"inputs\":[\"xb\",\"xa\"],\"outputs\":[\"xc\"],\"attrs\":{\"axis\":1}}],"
    "\"outputs\":[\"p1\",\"p2\",\"p3\",\"s1\",\"s3\",\"xt\",\"xs\",\"xc\"]}",
    /* matmul + bias + gelu, transposed B, f16 */
    "{\"mcir\":1,\"name\":\"mm\",\"inputs\":[{\"name\":\"a\",\"dtype\":\"f16\",\"shape\":[3,77,67]},"
    "{\"name\":\"b\",\"dtype\":\"f16\",\"shape\":[130,67]},{\"name\":\"bias\",\"dtype\":\"f16\",\"shape\":[130]}],"
    "\"nodes\":[{\"name\":\"mm\",\"op\":\"matmul\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"c\"],\"attrs\":{\"transpose_b\":true}},"
    "{\"name\":\"ad\",\"op\":\"add\",\"inputs\":[\"c\",\"bias\"],\"outputs\":[\"h\"]},"
    "{\"name\":\"ge\",\"op\":\"gelu\",\"inputs\":[\"h\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}",
    /* the sm_90a GEMM (taken without cuBLAS on sm_90): several tiles and
     * waves, a partial last K step, bias epilogue */
    "{\"mcir\":1,\"name\":\"mm_big\",\"inputs\":[{\"name\":\"a\",\"dtype\":\"f16\",\"shape\":[640,1000]},"
    "{\"name\":\"b\",\"dtype\":\"f16\",\"shape\":[768,1000]},{\"name\":\"bias\",\"dtype\":\"f16\",\"shape\":[768]}],"
    "\"nodes\":[{\"name\":\"mm\",\"op\":\"matmul\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"c\"],\"attrs\":{\"transpose_b\":true}},"
    "{\"name\":\"ad\",\"op\":\"add\",\"inputs\":[\"c\",\"bias\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}",
    /* a true batch, B [K, N] per batch, bf16 */
    "{\"mcir\":1,\"name\":\"mm_batch\",\"inputs\":[{\"name\":\"a\",\"dtype\":\"bf16\",\"shape\":[4,130,96]},"
    "{\"name\":\"b\",\"dtype\":\"bf16\",\"shape\":[4,96,200]}],"
    "\"nodes\":[{\"name\":\"mm\",\"op\":\"matmul\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}",
    /* SwiGLU prologue from two tensors, residual epilogue, bf16 */
    "{\"mcir\":1,\"name\":\"mm_swiglu\",\"inputs\":[{\"name\":\"g\",\"dtype\":\"bf16\",\"shape\":[300,136]},"
    "{\"name\":\"u\",\"dtype\":\"bf16\",\"shape\":[300,136]},{\"name\":\"w\",\"dtype\":\"bf16\",\"shape\":[136,520]},"
    "{\"name\":\"r\",\"dtype\":\"bf16\",\"shape\":[300,520]}],"
    "\"nodes\":[{\"name\":\"p1\",\"op\":\"silu\",\"inputs\":[\"g\"],\"outputs\":[\"sg\"]},"
    "{\"name\":\"p2\",\"op\":\"mul\",\"inputs\":[\"sg\",\"u\"],\"outputs\":[\"x\"]},"
    "{\"name\":\"mm\",\"op\":\"matmul\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"c\"]},"
    "{\"name\":\"ad\",\"op\":\"add\",\"inputs\":[\"c\",\"r\"],\"outputs\":[\"y\"]}],\"outputs\":[\"y\"]}",
    /* SwiGLU prologue from the two halves of one [.., 2K] tensor, f16 */
    "{\"mcir\":1,\"name\":\"mm_swiglu_split\",\"inputs\":[{\"name\":\"gu\",\"dtype\":\"f16\",\"shape\":[2,100,384]},"
    "{\"name\":\"w\",\"dtype\":\"f16\",\"shape\":[200,192]}],"
    "\"nodes\":[{\"name\":\"p0\",\"op\":\"split\",\"inputs\":[\"gu\"],\"outputs\":[\"g\",\"u\"],"
    "\"attrs\":{\"axis\":-1,\"sizes\":[192,192]}},"
    "{\"name\":\"p1\",\"op\":\"silu\",\"inputs\":[\"g\"],\"outputs\":[\"sg\"]},"
    "{\"name\":\"p2\",\"op\":\"mul\",\"inputs\":[\"sg\",\"u\"],\"outputs\":[\"x\"]},"
    "{\"name\":\"mm\",\"op\":\"matmul\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"y\"],\"attrs\":{\"transpose_b\":true}}],"
    "\"outputs\":[\"y\"]}",
};

START_TEST(test_template_edge_cases_match_cpu) {
    int failed = 0;
    for (size_t i = 0; i < sizeof EDGE / sizeof *EDGE; i++) {
        mcir_graph *g = cgt_graph(EDGE[i]);
        if (!check_graph(g, g->name, NULL, NULL)) failed++;
        mcir_graph_free(g);
    }
    ck_assert_int_eq(failed, 0);
}
END_TEST

/* Sessions with CUDA graphs (runtime.h): the first step captures, the
 * next replay with new inputs each step (seeded per step: finite, varied);
 * every step's outputs match the CPU, with graphs and without. The graphs:
 * the sm_90a attention (tensor maps by value), a cuBLASLt matmul with its
 * epilogue and a SwiGLU prologue, the norms, and the decode example
 * (split-KV merge). */
static bool check_graph_steps(mcir_graph *g, const char *what) {
    mcir_diag d = mcir_diag_stderr();
    planned pl = plan_graph(g, &d);
    ck_assert_ptr_nonnull(pl.plan);
    mcir_codegen *cg = mcir_codegen_new(pl.plan, pl.mem, &d);
    ck_assert_msg(cg != NULL, "%s: codegen failed", what);
    bool ok = true;
    for (int graphs = 1; graphs >= 0 && ok; graphs--) {
        mcir_env *gpu = mcir_env_new(g, 7);
        mcir_gpu_session_options o = {.mode = MCIR_ALLOC_POOL, .graphs = graphs};
        mcir_gpu_session *s = mcir_gpu_session_open(cg, gpu, &o, &d);
        ok = s != NULL;
        for (int step = 0; ok && step < 3; step++) {
            mcir_env *cpu = mcir_env_new(g, 7);
            for (int i = 0; i < g->n_inputs; i++) {
                float *v = malloc(sizeof(float) * (size_t)mcir_tensor_numel(g->inputs[i]));
                mcir_fill_seeded(g->inputs[i], (uint64_t)(11 + 5 * step + i), v);
                mcir_env_set(cpu, g->inputs[i], v);
                mcir_env_set(gpu, g->inputs[i], v);
                free(v);
            }
            ck_assert(mcir_interp_run(g, cpu, &d));
            mcir_gpu_stats st;
            char label[200];
            snprintf(label, sizeof label, "%s [%s, step %d]", what, graphs ? "graph" : "launches", step);
            if (!mcir_gpu_session_step(s, gpu, NULL, &st, &d)) {
                fprintf(stderr, "%s: GPU step failed\n", label);
                ok = false;
            } else {
                fprintf(stderr, "%s on %s: %.3f ms, host %.1f us\n", label, st.device_name, st.elapsed_ms,
                        st.host_us);
                ok = st.graph == (graphs == 1) && outputs_match(g, cpu, gpu, label);
            }
            mcir_env_free(cpu);
        }
        mcir_gpu_session_close(s);
        mcir_env_free(gpu);
    }
    mcir_codegen_free(cg);
    planned_free(&pl);
    return ok;
}

START_TEST(test_graph_sessions_match_cpu) {
    static const char *const names[] = {"att90_causal", "mm_swiglu", "norm16"};
    int failed = 0;
    for (size_t i = 0; i < sizeof EDGE / sizeof *EDGE; i++) {
        mcir_graph *g = cgt_graph(EDGE[i]);
        for (size_t j = 0; j < sizeof names / sizeof *names; j++)
            if (!strcmp(g->name, names[j]) && !check_graph_steps(g, g->name)) failed++;
        mcir_graph_free(g);
    }
    char path[1200];
    snprintf(path, sizeof path, "%s/examples/gpt2_decode/graph.json", test_source_dir());
    mcir_diag d = mcir_diag_stderr();
    mcir_graph *g = mcir_graph_read_json(path, &d);
    ck_assert_msg(g != NULL, "cannot read %s", path);
    if (!check_graph_steps(g, "gpt2_decode")) failed++;
    mcir_graph_free(g);
    ck_assert_int_eq(failed, 0);
}
END_TEST

/* Size-generic kernels (graphs with symbolic dims, docs/kernelplan.md):
 * each graph compiled once, then run at three sizes (mcir_codegen_rebind
 * takes the launches there) against the CPU at the same sizes; nothing is
 * compiled after the first size. The sm_90a attention (causal, split-KV
 * decode, GQA packing) and GEMM read the dims from shared memory, which
 * only a GPU run checks on hardware, and the norms and softmax over a
 * row width that is a dimension (a warp row's registers for the largest
 * row, 16-byte loads over 8*seq, the cached and the re-read block rows).
 * The graphs are planned as read, not rewritten (one kernel each, the
 * rmsnorm's residual add two); test_dims runs the blocks, rewritten, on
 * the emulator. */
START_TEST(test_size_generic_kernels_match_cpu) {
    static const struct {
        const char *path;
        int64_t sizes[3];
    } cases[] = {
        {"tests/data/dims/attention_f16_seq.json", {1, 77, 200}},
        {"tests/data/dims/decode_f16_past.json", {1, 700, 3001}},
        {"tests/data/dims/gqa_f16_seq.json", {1, 49, 96}},
        {"tests/data/dims/matmul_f16_seq.json", {1, 77, 300}},
        {"tests/data/dims/softmax_f16_seq.json", {1, 37, 128}},
        {"tests/data/dims/softmax_f32_seq.json", {1, 77, 2999}},
        {"tests/data/dims/layernorm_f16_seq.json", {1, 37, 128}},
        {"tests/data/dims/rmsnorm_bf16_seq.json", {1, 333, 19999}},
    };
    int failed = 0;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", test_source_dir(), cases[c].path);
        mcir_diag d = mcir_diag_stderr();
        mcir_graph *g = mcir_graph_read_json(path, &d);
        ck_assert_msg(g != NULL && g->n_dims == 1, "cannot read %s", path);
        planned pl = plan_graph(g, &d);
        ck_assert_ptr_nonnull(pl.plan);
        mcir_codegen *cg = mcir_codegen_new(pl.plan, pl.mem, &d);
        ck_assert_msg(cg != NULL, "%s: codegen failed", path);
        long compiles = 0;
        for (int i = 0; i < 3; i++) {
            int64_t v = cases[c].sizes[i];
            char label[1300];
            snprintf(label, sizeof label, "%s at %s=%lld", cases[c].path, g->dims[0].name, (long long)v);
            if (!mcir_codegen_rebind(cg, &v, &d)) {
                fprintf(stderr, "%s: not size-generic\n", label);
                failed++;
                break;
            }
            mcir_env *cpu = mcir_env_new(g, 5), *gpu = mcir_env_new(g, 5);
            ck_assert(mcir_interp_run(g, cpu, &d));
            mcir_gpu_stats st;
            if (i == 1) compiles = mcir_nvrtc_invocations();
            if (!mcir_gpu_run(cg, gpu, MCIR_ALLOC_POOL, &st, &d)) {
                fprintf(stderr, "%s: GPU run failed\n", label);
                failed++;
            } else {
                fprintf(stderr, "%s on %s: %.3f ms\n", label, st.device_name, st.elapsed_ms);
                if (!outputs_match(g, cpu, gpu, label)) failed++;
            }
            if (i == 2 && mcir_nvrtc_invocations() != compiles) {
                fprintf(stderr, "%s: compiled again (%ld NVRTC calls)\n", label, mcir_nvrtc_invocations() - compiles);
                failed++;
            }
            mcir_env_free(cpu);
            mcir_env_free(gpu);
        }
        mcir_codegen_free(cg);
        planned_free(&pl);
        mcir_graph_free(g);
    }
    ck_assert_int_eq(failed, 0);
}
END_TEST

/* More device memory than any GPU has, from small inputs: 129 chained
 * intermediates of 2 GiB each (2^29 f32 elements, the most one tensor may
 * hold), all allocated up front in eager mode by a plan that fuses
 * nothing (258 GiB); the run fails, saying what it asked for. */
START_TEST(test_out_of_device_memory_reports_sizes) {
    enum { CHAIN = 128 };
    char *js = malloc(200 * (CHAIN + 8));
    ck_assert_ptr_nonnull(js);
    int w = sprintf(js, "{\"mcir\":1,\"name\":\"huge\",\"inputs\":[{\"name\":\"a\",\"dtype\":\"f32\",\"shape\":[16384,1]},"
                        "{\"name\":\"b\",\"dtype\":\"f32\",\"shape\":[1,32768]}],"
                        "\"nodes\":[{\"name\":\"n0\",\"op\":\"mul\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"c0\"]}");
    for (int i = 1; i <= CHAIN; i++)
        w += sprintf(js + w, ",{\"name\":\"n%d\",\"op\":\"add\",\"inputs\":[\"c%d\",\"a\"],\"outputs\":[\"c%d\"]}", i,
                     i - 1, i);
    sprintf(js + w, ",{\"name\":\"rs\",\"op\":\"reduce_sum\",\"inputs\":[\"c%d\"],\"outputs\":[\"y\"],"
                    "\"attrs\":{\"axes\":[0,1]}}],\"outputs\":[\"y\"]}", CHAIN);
    mcir_graph *g = cgt_graph(js);
    free(js);
    mcir_plan *p = cgt_plan_naive(g, "sm_90");
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    mcir_diag d = mcir_diag_to(f);
    mcir_codegen *cg = mcir_codegen_new(p, NULL, &d);
    ck_assert_ptr_nonnull(cg);
    mcir_env *env = mcir_env_new(g, 0);
    mcir_gpu_stats st;
    ck_assert(!mcir_gpu_run(cg, env, MCIR_ALLOC_EAGER, &st, &d));
    fclose(f);
    fprintf(stderr, "%s", buf);
    ck_assert_ptr_nonnull(strstr(buf, "out of device memory"));
    ck_assert_ptr_nonnull(strstr(buf, "cuMemAlloc of 2147483648 bytes"));
    ck_assert_ptr_nonnull(strstr(buf, "free of"));
    free(buf);
    mcir_env_free(env);
    mcir_codegen_free(cg);
    mcir_graph_free(g);
}
END_TEST

int main(void) {
    char why[256];
    if (!mcir_gpu_available(why, sizeof why) || !mcir_nvrtc_available(why, sizeof why))
        return test_skip(why);
    cgt_temp_cache(cache_dir, sizeof cache_dir);
    Suite *s = suite_create("gpu");
    TCase *tc = tcase_create("gpu");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_template_edge_cases_match_cpu);
    tcase_add_test(tc, test_out_of_device_memory_reports_sizes);
    tcase_add_test(tc, test_graph_sessions_match_cpu);
    tcase_add_test(tc, test_size_generic_kernels_match_cpu);
    tcase_add_test(tc, test_examples_match_cpu);
    suite_add_tcase(s, tc);
    int failed = test_main_nofork(s);
    test_remove_dir(cache_dir);
    return failed;
}

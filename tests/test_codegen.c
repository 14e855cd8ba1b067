/*
 * test_codegen.c — every kernel template, instantiated from hand-made
 * graphs and plans over a sweep of parameters (dtypes, head dims, tiles,
 * causal / mask, odd sizes), compiles with NVRTC to PTX and cubin for
 * sm_80 and sm_90; the kernel cache makes a second compile call NVRTC zero
 * times and survives a corrupt entry; a broken source fails with NVRTC's
 * log and the offending line; registers / spills reach the plan. No GPU
 * needed. Runs with MCIR_CACHE_DIR set to a fresh temporary directory.
 */
#include <check.h>
#include <dirent.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "codegen/codegen-impl.h"
#include "codegen_util.h"
#include "test_util.h"

static char cache_dir[256];

static void need_nvrtc(void) {
    char why[256];
    if (!mcir_nvrtc_available(why, sizeof why)) {
        fprintf(stderr, "skip: %s\n", why);
        exit(77);
    }
}

static const char *DT[] = {"f32", "f16", "bf16"};

/* ------------------------------------------------------------ the sweep */

typedef struct sweep_case {
    char *json;
    int n_kernels;
    cgt_kspec ks[4];
    char label[128];
} sweep_case;

static sweep_case *cases;
static int n_cases, cap_cases;

static sweep_case *add_case(const char *label) {
    if (n_cases == cap_cases) {
        cap_cases = cap_cases ? cap_cases * 2 : 64;
        cases = realloc(cases, sizeof *cases * (size_t)cap_cases);
    }
    sweep_case *c = &cases[n_cases++];
    memset(c, 0, sizeof *c);
    snprintf(c->label, sizeof c->label, "%s", label);
    return c;
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, f, ap);
    va_end(ap);
    char *s = malloc((size_t)n + 1);
    vsnprintf(s, (size_t)n + 1, f, ap2);
    va_end(ap2);
    return s;
}

static void build_sweep(void) {
    char label[128];
    for (int t = 0; t < 3; t++) {
        const char *dt = DT[t];
        /* elementwise: a gelu / silu / pow / max chain with broadcasts */
        snprintf(label, sizeof label, "elementwise %s", dt);
        sweep_case *c = add_case(label);
        c->json = fmt("{\"mcir\":1,\"name\":\"ew_%s\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"%s\",\"shape\":[3,77,96]},"
                      "{\"name\":\"b\",\"dtype\":\"%s\",\"shape\":[96]},{\"name\":\"s\",\"dtype\":\"%s\",\"shape\":[3,1,1]}],"
                      "\"nodes\":[{\"name\":\"a\",\"op\":\"add\",\"inputs\":[\"x\",\"b\"],\"outputs\":[\"a\"]},"
                      "{\"name\":\"g\",\"op\":\"gelu\",\"inputs\":[\"a\"],\"outputs\":[\"g\"]},"
                      "{\"name\":\"gt\",\"op\":\"gelu\",\"inputs\":[\"a\"],\"outputs\":[\"gt\"],\"attrs\":{\"approximate\":\"tanh\"}},"
                      "{\"name\":\"si\",\"op\":\"silu\",\"inputs\":[\"g\"],\"outputs\":[\"si\"]},"
                      "{\"name\":\"p\",\"op\":\"pow\",\"inputs\":[\"si\",\"s\"],\"outputs\":[\"p\"]},"
                      "{\"name\":\"m\",\"op\":\"max\",\"inputs\":[\"p\",\"gt\"],\"outputs\":[\"m\"]},"
                      "{\"name\":\"sc\",\"op\":\"scale\",\"inputs\":[\"m\"],\"outputs\":[\"y\"],\"attrs\":{\"value\":0.125}}],"
                      "\"outputs\":[\"y\",\"a\"]}", dt, dt, dt, dt);
        c->n_kernels = 1;
        c->ks[0] = (cgt_kspec){MCIR_TEMPLATE_ELEMENTWISE, NULL, "a,g,gt,si,p,m,sc"};
    }
    /* attention: head dims x (plain | causal with odd Nq/Nk | additive mask) */
    static const int HD[] = {32, 64, 80, 128, 256};
    for (int t = 0; t < 3; t++)
        for (int h = 0; h < 5; h++)
            for (int var = 0; var < 3; var++) {
                const char *dt = DT[t];
                int D = HD[h], nq = var == 0 ? 128 : 77, nk = var == 0 ? 128 : 196;
                snprintf(label, sizeof label, "attention %s d=%d %s", dt, D,
                         var == 0 ? "plain" : var == 1 ? "causal 77x196" : "mask 77x196");
                sweep_case *c = add_case(label);
                char mask_in[128] = "";
                if (var == 2)
                    snprintf(mask_in, sizeof mask_in, ",{\"name\":\"m\",\"dtype\":\"%s\",\"shape\":[2,1,1,%d]}", dt, nk);
                c->json = fmt("{\"mcir\":1,\"name\":\"att_%s_%d_%d\",\"inputs\":["
                              "{\"name\":\"q\",\"dtype\":\"%s\",\"shape\":[2,3,%d,%d]},"
                              "{\"name\":\"k\",\"dtype\":\"%s\",\"shape\":[2,3,%d,%d]},"
                              "{\"name\":\"v\",\"dtype\":\"%s\",\"shape\":[2,3,%d,%d]}%s],"
                              "\"nodes\":[{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\"%s],"
                              "\"outputs\":[\"y\"],\"attrs\":{\"causal\":%s}}],\"outputs\":[\"y\"]}",
                              dt, D, var, dt, nq, D, dt, nk, D, dt, nk, D,
                              mask_in,
                              var == 2 ? ",\"m\"" : "", var == 1 ? "true" : "false");
                c->n_kernels = 1;
                c->ks[0] = (cgt_kspec){MCIR_TEMPLATE_STREAMING_ATTENTION, "at", "at"};
            }
    /* norms: residual add fused before, scale after; widths from a warp's
     * row to the two-level block scheme (262144) */
    static const int W[] = {77, 4096, 262144};
    static const char *NORM[] = {"softmax", "layernorm", "rmsnorm"};
    for (int t = 0; t < 3; t++)
        for (int w = 0; w < 3; w++)
            for (int kind = 0; kind < 3; kind++) {
                const char *dt = DT[t];
                int rows = W[w] >= 20000 ? 3 : 50;
                if (t > 0 && w == 1) continue;   /* 16-bit: a warp row and the widest */
                snprintf(label, sizeof label, "%s %s w=%d", NORM[kind], dt, W[w]);
                sweep_case *c = add_case(label);
                c->json = fmt("{\"mcir\":1,\"name\":\"n%d_%s_%d\",\"inputs\":["
                              "{\"name\":\"x\",\"dtype\":\"%s\",\"shape\":[%d,%d]},"
                              "{\"name\":\"r\",\"dtype\":\"%s\",\"shape\":[%d,%d]},"
                              "{\"name\":\"g\",\"dtype\":\"%s\",\"shape\":[%d]},"
                              "{\"name\":\"b\",\"dtype\":\"%s\",\"shape\":[%d]}],"
                              "\"nodes\":[{\"name\":\"add\",\"op\":\"add\",\"inputs\":[\"x\",\"r\"],\"outputs\":[\"h\"]},"
                              "{\"name\":\"nm\",\"op\":\"%s\",\"inputs\":[\"h\"%s],\"outputs\":[\"z\"]},"
                              "{\"name\":\"sc\",\"op\":\"scale\",\"inputs\":[\"z\"],\"outputs\":[\"y\"],\"attrs\":{\"value\":2.0}}],"
                              "\"outputs\":[\"y\"]}", kind, dt, W[w], dt, rows, W[w], dt, rows, W[w], dt, W[w], dt, W[w],
                              NORM[kind], kind == 0 ? "" : kind == 1 ? ",\"g\",\"b\"" : ",\"g\"");
                c->n_kernels = 1;
                c->ks[0] = (cgt_kspec){MCIR_TEMPLATE_STREAMING_NORM, "nm", "add,nm,sc"};
            }
    /* softmax over a middle axis, unvectorised */
    {
        sweep_case *c = add_case("softmax axis=1");
        c->json = fmt("{\"mcir\":1,\"name\":\"smax1\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[4,33,5]}],"
                      "\"nodes\":[{\"name\":\"sm\",\"op\":\"softmax\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"axis\":1}}],"
                      "\"outputs\":[\"y\"]}");
        c->n_kernels = 1;
        c->ks[0] = (cgt_kspec){MCIR_TEMPLATE_STREAMING_NORM, "sm", "sm"};
    }
    /* matmul: transposes, broadcast batch, bias + gelu epilogue */
    for (int t = 0; t < 3; t++)
        for (int var = 0; var < 3; var++) {
            const char *dt = DT[t];
            snprintf(label, sizeof label, "matmul %s %s", dt, var == 0 ? "plain" : var == 1 ? "transposed" : "bias+gelu");
            sweep_case *c = add_case(label);
            c->json = fmt("{\"mcir\":1,\"name\":\"mm_%s_%d\",\"inputs\":["
                          "{\"name\":\"a\",\"dtype\":\"%s\",\"shape\":%s},"
                          "{\"name\":\"b\",\"dtype\":\"%s\",\"shape\":%s},"
                          "{\"name\":\"bias\",\"dtype\":\"%s\",\"shape\":[130]}],"
                          "\"nodes\":[{\"name\":\"mm\",\"op\":\"matmul\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"c\"],"
                          "\"attrs\":{\"transpose_a\":%s,\"transpose_b\":%s}},"
                          "{\"name\":\"ad\",\"op\":\"add\",\"inputs\":[\"c\",\"bias\"],\"outputs\":[\"h\"]},"
                          "{\"name\":\"ge\",\"op\":\"gelu\",\"inputs\":[\"h\"],\"outputs\":[\"y\"]}],"
                          "\"outputs\":[\"y\"]}", dt, var, dt, var == 1 ? "[3,67,77]" : "[3,77,67]", dt,
                          var == 1 ? "[130,67]" : "[67,130]", dt, var == 1 ? "true" : "false", var == 1 ? "true" : "false");
            c->n_kernels = var == 2 ? 1 : 2;
            if (var == 2) {
                c->ks[0] = (cgt_kspec){MCIR_TEMPLATE_MATMUL, "mm", "mm,ad,ge"};
            } else {
                c->ks[0] = (cgt_kspec){MCIR_TEMPLATE_MATMUL, "mm", "mm"};
                c->ks[1] = (cgt_kspec){MCIR_TEMPLATE_ELEMENTWISE, NULL, "ad,ge"};
            }
        }
    /* reductions, copies, pooling, conv2d */
    for (int t = 0; t < 3; t++) {
        const char *dt = DT[t];
        snprintf(label, sizeof label, "reduce/copy/pool/conv %s", dt);
        sweep_case *c = add_case(label);
        c->json = fmt("{\"mcir\":1,\"name\":\"misc_%s\",\"inputs\":["
                      "{\"name\":\"x\",\"dtype\":\"%s\",\"shape\":[2,6,15,17]},"
                      "{\"name\":\"w\",\"dtype\":\"%s\",\"shape\":[8,3,3,3]},"
                      "{\"name\":\"cb\",\"dtype\":\"%s\",\"shape\":[8]}],"
                      "\"nodes\":["
                      "{\"name\":\"cv\",\"op\":\"conv2d\",\"inputs\":[\"x\",\"w\",\"cb\"],\"outputs\":[\"c\"],"
                      "\"attrs\":{\"strides\":[2,1],\"pads\":[1,1,1,1],\"dilations\":[1,2],\"groups\":2}},"
                      "{\"name\":\"re\",\"op\":\"relu\",\"inputs\":[\"c\"],\"outputs\":[\"cr\"]},"
                      "{\"name\":\"mp\",\"op\":\"max_pool2d\",\"inputs\":[\"cr\"],\"outputs\":[\"p1\"],\"attrs\":{\"kernel\":[3,3],\"strides\":[2,2],\"pads\":[1,1,1,1]}},"
                      "{\"name\":\"ap\",\"op\":\"avg_pool2d\",\"inputs\":[\"cr\"],\"outputs\":[\"p2\"],\"attrs\":{\"kernel\":[2,3],\"pads\":[1,1,0,1]}},"
                      "{\"name\":\"gp\",\"op\":\"global_avg_pool\",\"inputs\":[\"cr\"],\"outputs\":[\"p3\"]},"
                      "{\"name\":\"rs\",\"op\":\"reduce_sum\",\"inputs\":[\"x\"],\"outputs\":[\"s1\"],\"attrs\":{\"axes\":[1,3]}},"
                      "{\"name\":\"rm\",\"op\":\"reduce_mean\",\"inputs\":[\"x\"],\"outputs\":[\"s2\"],\"attrs\":{\"axes\":[-1],\"keepdims\":false}},"
                      "{\"name\":\"rx\",\"op\":\"reduce_max\",\"inputs\":[\"x\"],\"outputs\":[\"s3\"],\"attrs\":{\"axes\":[0,1,2,3]}},"
                      "{\"name\":\"t2\",\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"xt\"],\"attrs\":{\"perm\":[0,1,3,2]}},"
                      "{\"name\":\"t3\",\"op\":\"transpose\",\"inputs\":[\"x\"],\"outputs\":[\"xu\"],\"attrs\":{\"perm\":[3,0,2,1]}},"
                      "{\"name\":\"sl\",\"op\":\"slice\",\"inputs\":[\"x\"],\"outputs\":[\"xs\"],\"attrs\":{\"axis\":2,\"start\":-2,\"end\":1,\"step\":-3}},"
                      "{\"name\":\"sp\",\"op\":\"split\",\"inputs\":[\"x\"],\"outputs\":[\"xa\",\"xb\"],\"attrs\":{\"axis\":1,\"sizes\":[2,4]}},"
                      "{\"name\":\"cc\",\"op\":\"concat\",\"inputs\":[\"xb\",\"xa\",\"xb\"],\"outputs\":[\"xc\"],\"attrs\":{\"axis\":1}}],"
                      "\"outputs\":[\"p1\",\"p2\",\"p3\",\"s1\",\"s2\",\"s3\",\"xt\",\"xu\",\"xs\",\"xc\"]}",
                      dt, dt, dt, dt);
        c->n_kernels = 0;
        /* filled below: too many kernels for ks[4]; use the naive plan */
    }
    /* attention with head split / merge folded in: reads [B, N, H*D] in place */
    for (int t = 0; t < 3; t++) {
        const char *dt = DT[t];
        snprintf(label, sizeof label, "attention %s head split/merge folded", dt);
        sweep_case *c = add_case(label);
        c->json = fmt("{\"mcir\":1,\"name\":\"mha_%s\",\"inputs\":["
                      "{\"name\":\"xq\",\"dtype\":\"%s\",\"shape\":[2,77,640]},"
                      "{\"name\":\"xk\",\"dtype\":\"%s\",\"shape\":[2,196,640]},"
                      "{\"name\":\"xv\",\"dtype\":\"%s\",\"shape\":[2,196,640]}],"
                      "\"nodes\":["
                      "{\"name\":\"rq\",\"op\":\"reshape\",\"inputs\":[\"xq\"],\"outputs\":[\"q4\"],\"attrs\":{\"shape\":[2,77,8,80]}},"
                      "{\"name\":\"tq\",\"op\":\"transpose\",\"inputs\":[\"q4\"],\"outputs\":[\"q\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
                      "{\"name\":\"rk\",\"op\":\"reshape\",\"inputs\":[\"xk\"],\"outputs\":[\"k4\"],\"attrs\":{\"shape\":[2,196,8,80]}},"
                      "{\"name\":\"tk\",\"op\":\"transpose\",\"inputs\":[\"k4\"],\"outputs\":[\"k\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
                      "{\"name\":\"rv\",\"op\":\"reshape\",\"inputs\":[\"xv\"],\"outputs\":[\"v4\"],\"attrs\":{\"shape\":[2,196,8,80]}},"
                      "{\"name\":\"tv\",\"op\":\"transpose\",\"inputs\":[\"v4\"],\"outputs\":[\"v\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
                      "{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\"],\"outputs\":[\"o\"]},"
                      "{\"name\":\"to\",\"op\":\"transpose\",\"inputs\":[\"o\"],\"outputs\":[\"o4\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
                      "{\"name\":\"ro\",\"op\":\"reshape\",\"inputs\":[\"o4\"],\"outputs\":[\"y\"],\"attrs\":{\"shape\":[2,77,640]}}],"
                      "\"outputs\":[\"y\"]}", dt, dt, dt, dt);
        c->n_kernels = 1;
        c->ks[0] = (cgt_kspec){MCIR_TEMPLATE_STREAMING_ATTENTION, "at", "rq,tq,rk,tk,rv,tv,at,to,ro"};
    }
}

typedef struct job {
    int next;
    pthread_mutex_t mu;
    int failures;
    int compiled;
    double max_reg_time;
} job;

static const char *ARCHS[] = {"sm_80", "sm_90"};

/* f16/bf16 attention (every sweep head dim is a multiple of 8) runs on
 * tensor cores: the mma path of the template. */
static bool wants_mma(const char *label) {
    return !strncmp(label, "attention f16 ", 14) || !strncmp(label, "attention bf16 ", 15);
}

static bool compile_case(sweep_case *c, const char *arch, int *kernels) {
    mcir_graph *g = cgt_graph(c->json);
    mcir_plan *p = c->n_kernels ? cgt_plan(g, arch, c->n_kernels, c->ks) : cgt_plan_naive(g, arch);
    mcir_diag d = mcir_diag_stderr();
    mcir_codegen *cg = mcir_codegen_new(p, NULL, &d);
    bool ok = cg != NULL;
    if (ok) ok = mcir_codegen_compile(cg, arch, &d);
    if (ok)
        for (int i = 0; i < p->n_kernels; i++) {
            if (!mcir_codegen_kernel_source(cg, i)) continue;
            (*kernels)++;
            const mcir_kernel_audit *a = &p->kernels[i].audit;
            if (p->kernels[i].registers <= 0 || !a->valid || a->registers != p->kernels[i].registers)
                ok = false;
            if (wants_mma(c->label) && a->mma == 0 && a->wgmma == 0) {
                fprintf(stderr, "%s (%s): no mma.sync or wgmma in the PTX\n", c->label, arch);
                ok = false;
            }
            /* f16/bf16 GEMMs (matmul, conv2d as implicit GEMM): tensor
             * cores, no spills, registers inside the budget the plan gives
             * ptxas (launch bounds: the estimate + 1/4 + 8) */
            mcir_gemm_problem gp;
            if (mcir_gemm_problem_of(&p->kernels[i], &gp) && gp.mma) {
                int est = p->kernels[i].tiling.registers_estimate;
                if (a->mma == 0 || a->spill_store_bytes + a->spill_load_bytes > 0 ||
                    a->registers > est + est / 4 + 8) {
                    fprintf(stderr, "%s (%s) %s: mma %d, spills %d/%d B, registers %d vs plan %d\n",
                            c->label, arch, p->kernels[i].name, a->mma, a->spill_store_bytes,
                            a->spill_load_bytes, a->registers, est);
                    ok = false;
                }
            }
            if (getenv("MCIR_SWEEP_VERBOSE"))
                fprintf(stderr, "  %-28s %-6s %-40s regs %3d spill %d smem %lld\n", c->label, arch,
                        p->kernels[i].name, p->kernels[i].registers, p->kernels[i].spill_bytes,
                        (long long)mcir_codegen_kernel_smem(cg, i));
        }
    if (!ok) fprintf(stderr, "FAILED: %s for %s\n", c->label, arch);
    mcir_codegen_free(cg);
    mcir_graph_free(g);
    return ok;
}

static void *worker(void *arg) {
    job *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        int i = j->next++;
        pthread_mutex_unlock(&j->mu);
        if (i >= n_cases * 2) break;
        int kernels = 0;
        bool ok = compile_case(&cases[i / 2], ARCHS[i % 2], &kernels);
        pthread_mutex_lock(&j->mu);
        j->failures += !ok;
        j->compiled += kernels;
        pthread_mutex_unlock(&j->mu);
    }
    return NULL;
}

static const char *cg_template_label(mcir_template t) {
    static const char *names[] = {
#define X(id, name) name,
        MCIR_TEMPLATES(X)
#undef X
    };
    return (int)t >= 0 && (int)t < MCIR_TEMPLATE_COUNT ? names[t] : "?";
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

START_TEST(test_sweep_compiles_for_sm80_and_sm90) {
    need_nvrtc();
    build_sweep();
    job j = {.mu = PTHREAD_MUTEX_INITIALIZER};
    double t0 = now_s();
    long calls0 = mcir_nvrtc_invocations();
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, worker, &j);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    fprintf(stderr, "sweep: %d cases x 2 archs, %d kernels, %ld NVRTC calls, %.1f s\n", n_cases,
            j.compiled, mcir_nvrtc_invocations() - calls0, now_s() - t0);
    ck_assert_int_eq(j.failures, 0);
    /* the second time round everything comes from the cache: one case at
     * a time, so that a case that calls NVRTC again is named */
    long calls1 = mcir_nvrtc_invocations();
    char again[1024] = "";
    t0 = now_s();
    for (int i = 0; i < n_cases * 2; i++) {
        long before = mcir_nvrtc_invocations();
        int kernels = 0;
        ck_assert(compile_case(&cases[i / 2], ARCHS[i % 2], &kernels));
        if (mcir_nvrtc_invocations() != before && strlen(again) < sizeof again - 200)
            snprintf(again + strlen(again), sizeof again - strlen(again), " %s (%s)", cases[i / 2].label,
                     ARCHS[i % 2]);
    }
    fprintf(stderr, "sweep again (cached): %.2f s\n", now_s() - t0);
    ck_assert_msg(mcir_nvrtc_invocations() == calls1, "%ld NVRTC calls the second time, by:%s",
                  mcir_nvrtc_invocations() - calls1, again);
    for (int i = 0; i < n_cases; i++) free(cases[i].json);
    free(cases);
    cases = NULL;
    n_cases = cap_cases = 0;
}
END_TEST

/* ------------------------------------------------------------- the cache */

static const char *TINY =
    "{\"mcir\":1,\"name\":\"tiny\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[5,7]}],"
    "\"nodes\":[{\"name\":\"r\",\"op\":\"relu\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}],"
    "\"outputs\":[\"y\"]}";

START_TEST(test_cache_second_compile_skips_nvrtc) {
    need_nvrtc();
    mcir_graph *g = cgt_graph(TINY);
    mcir_plan *p = cgt_plan_naive(g, "sm_90");
    mcir_diag d = mcir_diag_stderr();
    mcir_codegen *cg = mcir_codegen_new(p, NULL, &d);
    ck_assert_ptr_nonnull(cg);
    /* a source nobody compiled before in this cache */
    char arch[] = "sm_86";
    long c0 = mcir_nvrtc_invocations();
    ck_assert(mcir_codegen_compile(cg, arch, &d));
    long c1 = mcir_nvrtc_invocations();
    ck_assert_int_eq(c1 - c0, 1);
    ck_assert_int_gt(p->kernels[0].registers, 0);
    int regs = p->kernels[0].registers;
    ck_assert(mcir_codegen_compile(cg, arch, &d));
    ck_assert_int_eq(mcir_nvrtc_invocations() - c1, 0);
    ck_assert_int_eq(p->kernels[0].registers, regs);

    /* corrupt every entry: the next compile ignores them and rebuilds */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "for f in %s/*.kbin; do printf 'garbage' | dd of=\"$f\" bs=1 seek=60 conv=notrunc 2>/dev/null; done", cache_dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert(mcir_codegen_compile(cg, arch, &d));
    ck_assert_int_eq(mcir_nvrtc_invocations() - c1, 1);
    ck_assert(mcir_codegen_compile(cg, arch, &d));
    ck_assert_int_eq(mcir_nvrtc_invocations() - c1, 1);
    /* truncated entry */
    snprintf(cmd, sizeof cmd, "for f in %s/*.kbin; do truncate -s 20 \"$f\"; done", cache_dir);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert(mcir_codegen_compile(cg, arch, &d));
    ck_assert_int_eq(mcir_nvrtc_invocations() - c1, 2);
    mcir_codegen_free(cg);
    mcir_graph_free(g);
}
END_TEST

/* Kernels whose sources differ only in names share one compile unit: two
 * identical relu chains on different tensors compile once, a third with
 * another constant on its own; the missing units compile in parallel. */
START_TEST(test_identical_sources_compile_once) {
    need_nvrtc();
    mcir_graph *g = cgt_graph(
        "{\"mcir\":1,\"name\":\"twins\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[9,13]}],"
        "\"nodes\":[{\"name\":\"r0\",\"op\":\"relu\",\"inputs\":[\"x\"],\"outputs\":[\"a\"]},"
        "{\"name\":\"r1\",\"op\":\"relu\",\"inputs\":[\"a\"],\"outputs\":[\"b\"]},"
        "{\"name\":\"s2\",\"op\":\"scale\",\"inputs\":[\"b\"],\"outputs\":[\"y\"],\"attrs\":{\"value\":0.25}}],"
        "\"outputs\":[\"y\"]}");
    mcir_plan *p = cgt_plan_naive(g, "sm_89");
    mcir_diag d = mcir_diag_stderr();
    mcir_codegen *cg = mcir_codegen_new(p, NULL, &d);
    ck_assert_ptr_nonnull(cg);
    ck_assert_str_ne(p->kernels[0].name, p->kernels[1].name);   /* the plan keeps its names */
    ck_assert_str_eq(mcir_codegen_kernel_entry(cg, 0), mcir_codegen_kernel_entry(cg, 1));
    ck_assert_str_ne(mcir_codegen_kernel_entry(cg, 0), mcir_codegen_kernel_entry(cg, 2));
    ck_assert_ptr_nonnull(strstr(mcir_codegen_kernel_entry(cg, 0), "mc_elementwise_"));
    setenv("MCIR_NVRTC_THREADS", "2", 1);
    long c0 = mcir_nvrtc_invocations();
    ck_assert(mcir_codegen_compile(cg, "sm_89", &d));
    unsetenv("MCIR_NVRTC_THREADS");
    mcir_compile_stats st;
    mcir_codegen_compile_stats(cg, &st);
    ck_assert_int_eq(mcir_nvrtc_invocations() - c0, 2);
    ck_assert_int_eq(st.nvrtc_compiles, 2);
    ck_assert_int_eq(st.kernels, 3);
    ck_assert_int_eq(st.units, 2);
    ck_assert_int_eq(st.threads, 2);
    ck_assert_int_eq(st.cache_hits, 0);
    ck_assert_ptr_eq(mcir_codegen_kernel_ptx(cg, 0), mcir_codegen_kernel_ptx(cg, 1));
    ck_assert_int_eq(p->kernels[1].audit.shared_by, 2);
    ck_assert_int_eq(p->kernels[2].audit.shared_by, 1);
    ck_assert_int_gt(p->kernels[1].registers, 0);
    ck_assert_str_eq(p->kernels[1].audit.entry, mcir_codegen_kernel_entry(cg, 1));
    char target[96];
    snprintf(target, sizeof target, ".entry %s(", mcir_codegen_kernel_entry(cg, 2));
    ck_assert_ptr_nonnull(strstr(mcir_codegen_kernel_ptx(cg, 2), target));
    /* again: both units from the cache */
    ck_assert(mcir_codegen_compile(cg, "sm_89", &d));
    mcir_codegen_compile_stats(cg, &st);
    ck_assert_int_eq(st.nvrtc_compiles, 0);
    ck_assert_int_eq(st.cache_hits, 2);
    ck_assert_int_eq(mcir_nvrtc_invocations() - c0, 2);
    mcir_codegen_free(cg);
    mcir_graph_free(g);
}
END_TEST

/* The compile unit: comments blanked (lines kept), v<ID> (and the packed
 * p<ID>) renumbered by first use, the entry named by what remains; literals
 * and numbers verbatim. */
START_TEST(test_compile_unit_ignores_names) {
    static const char a[] =
        "// kernel layer0_mlp (matmul)\n/* region: h0.mlp */\n#define S \"// not a comment\"\n"
        "__device__ float v17(float x) { return x * 1.5e-3f; }   // h0.b read\n"
        "__device__ float v9(float x) { return v17(x) + 0x1eLL; }\n"
        "__device__ float p17(float x) { return v17(x); }   // packed index\n"
        "extern \"C\" __global__ void layer0_mlp(float* p) { p[0] = v9(p[1]); }\n";
    static const char b[] =
        "// kernel layer7_mlp (matmul)\n/* region: h7.mlp */\n#define S \"// not a comment\"\n"
        "__device__ float v41(float x) { return x * 1.5e-3f; }   // h7.b read\n"
        "__device__ float v40(float x) { return v41(x) + 0x1eLL; }\n"
        "__device__ float p41(float x) { return v41(x); }   // packed index\n"
        "extern \"C\" __global__ void layer7_mlp(float* p) { p[0] = v40(p[1]); }\n";
    char ea[64], eb[64], ec[64];
    char *ua = cg_compile_unit(a, "layer0_mlp", "matmul", ea);
    char *ub = cg_compile_unit(b, "layer7_mlp", "matmul", eb);
    ck_assert_str_eq(ea, eb);
    ck_assert_str_eq(ua, ub);
    ck_assert_ptr_nonnull(strstr(ua, "\"// not a comment\""));
    ck_assert_ptr_nonnull(strstr(ua, "__device__ float v0(float x) { return x * 1.5e-3f; }"));
    ck_assert_ptr_nonnull(strstr(ua, "return v0(x) + 0x1eLL;"));
    ck_assert_ptr_nonnull(strstr(ua, "__device__ float p0(float x) { return v0(x); }"));
    ck_assert_ptr_null(strstr(ua, "h0."));
    ck_assert_ptr_null(strstr(ua, "layer0"));
    char decl[100];
    snprintf(decl, sizeof decl, "void %s(float* p) { p[0] = v1(p[1]); }", ea);
    ck_assert_ptr_nonnull(strstr(ua, decl));
    int lines_a = 0, lines_u = 0;
    for (const char *q = a; *q; q++) lines_a += *q == '\n';
    for (const char *q = ua; *q; q++) lines_u += *q == '\n';
    ck_assert_int_eq(lines_a, lines_u);
    /* another constant: another unit */
    char *c = strdup(a);
    *strstr(c, "1.5e-3f") = '2';
    char *uc = cg_compile_unit(c, "layer0_mlp", "matmul", ec);
    ck_assert_str_ne(ea, ec);
    free(ua);
    free(ub);
    free(uc);
    free(c);
}
END_TEST

START_TEST(test_cache_dir_from_environment) {
    char buf[512];
    setenv("MCIR_CACHE_DIR", "/x/y", 1);
    ck_assert(mcir_cache_dir(buf, sizeof buf));
    ck_assert_str_eq(buf, "/x/y");
    unsetenv("MCIR_CACHE_DIR");
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    ck_assert(mcir_cache_dir(buf, sizeof buf));
    ck_assert_str_eq(buf, "/xdg/mcir");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/u", 1);
    ck_assert(mcir_cache_dir(buf, sizeof buf));
    ck_assert_str_eq(buf, "/home/u/.cache/mcir");
    setenv("MCIR_CACHE_DIR", cache_dir, 1);
}
END_TEST

/* ----------------------------------------------------- compile failures */

START_TEST(test_syntax_error_reports_log_and_line) {
    need_nvrtc();
    const char *src =
        "// broken template\n"
        "extern \"C\" __global__ void broken_kernel(float* p) {\n"
        "    p[threadIdx.x] = 1.0f +;\n"
        "}\n";
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    mcir_diag d = mcir_diag_to(f);
    mcir_compiled c;
    ck_assert(!mcir_nvrtc_compile_source("broken_kernel", src, "sm_90", &c, &d));
    fclose(f);
    ck_assert_int_ge(d.n_errors, 1);
    ck_assert_ptr_nonnull(strstr(buf, "error"));
    ck_assert_ptr_nonnull(strstr(buf, "broken_kernel.cu(3)"));             /* NVRTC's log */
    ck_assert_ptr_nonnull(strstr(buf, "p[threadIdx.x] = 1.0f +;"));        /* the line */
    free(buf);
}
END_TEST

START_TEST(test_ptxas_report_parsed) {
    int r, s, st;
    mcir_ptxas_parse(
        "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
        "ptxas         .     24 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
        "ptxas info    : Used 168 registers, used 1 barriers, 24 bytes cumulative stack size\n",
        &r, &s, &st);
    ck_assert_int_eq(r, 168);
    ck_assert_int_eq(s, 20);
    ck_assert_int_eq(st, 24);
}
END_TEST

/* The entry's registers, stack and static shared memory; spills of a
 * non-inlined callee count too, its stack frame does not. */
START_TEST(test_ptxas_report_entry_and_callee) {
    mcir_compiled c;
    memset(&c, 0, sizeof c);
    mcir_ptxas_report(
        "ptxas info    : 0 bytes gmem\n"
        "ptxas info    : Function properties for helper_fn\n"
        "ptxas         .     64 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads\n"
        "ptxas info    : Compiling entry function 'entry_k' for 'sm_80'\n"
        "ptxas info    : Function properties for entry_k\n"
        "ptxas         .     16 bytes stack frame, 16 bytes spill stores, 32 bytes spill loads\n"
        "ptxas info    : Used 96 registers, used 1 barriers, 8704 bytes smem, 400 bytes cmem[0]\n"
        "ptxas info    : Compile time = 95.895 ms\n",
        &c);
    ck_assert_int_eq(c.registers, 96);
    ck_assert_int_eq(c.stack_bytes, 16);
    ck_assert_int_eq(c.spill_store_bytes, 20);
    ck_assert_int_eq(c.spill_load_bytes, 40);
    ck_assert_int_eq(c.spill_bytes, 60);
    ck_assert_int_eq(c.smem_static_bytes, 8704);
    mcir_ptxas_report(NULL, &c);
    ck_assert_int_eq(c.registers, -1);
    ck_assert_int_eq(c.spill_bytes, 0);
}
END_TEST

/* ptxas's advisories and warnings are counted, the first kept ("C7514:
 * ..."); a unit's split-KV merge entry (ENTRY_merge), compiled first,
 * does not stand for the unit: the registers are ENTRY's. The log is
 * NVRTC's for an sm_90a attention whose P was converted before its wait
 * (the defect #27 fixed), trimmed. */
START_TEST(test_ptxas_report_advisories_and_merge_entry) {
    mcir_compiled c;
    memset(&c, 0, sizeof c);
    mcir_ptxas_report(
        "ptxas info    : (C7517) warpgroup.wait is injected in around line 2105 by compiler to allow use of "
        "registers defined by GMMA in function 'mha_at'\n"
        "ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
        "non wgmma instructions reading accumulator registers of  a wgmma between start and end of the pipeline "
        "stage in the function 'mha_at'\n"
        "ptxas warning : Value of threads per SM for entry mha_at is out of range\n"
        "ptxas info    : 0 bytes gmem\n"
        "ptxas info    : Compiling entry function 'mha_at_merge' for 'sm_90a'\n"
        "ptxas info    : Function properties for mha_at_merge\n"
        "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 32 registers, used 0 barriers\n"
        "ptxas info    : Compiling entry function 'mha_at' for 'sm_90a'\n"
        "ptxas info    : Function properties for mha_at\n"
        "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 168 registers, used 16 barriers, 48 bytes smem\n",
        &c);
    ck_assert_int_eq(c.advisories, 3);
    ck_assert_str_eq(c.advisory, "C7517: warpgroup.wait is injected in around line 2105 by compiler to allow use "
                                 "of registers defined by GMMA in function 'mha_at'");
    ck_assert_int_eq(c.registers, 168);
    ck_assert_int_eq(c.smem_static_bytes, 48);
    mcir_ptxas_report("ptxas warning : Registers are spilled to local memory in function 'k'\n"
                      "ptxas info    : Used 40 registers\n",
                      &c);
    ck_assert_int_eq(c.advisories, 1);
    ck_assert_str_eq(c.advisory, "warning: Registers are spilled to local memory in function 'k'");
    mcir_ptxas_report("ptxas info    : Used 40 registers\n", &c);
    ck_assert_int_eq(c.advisories, 0);
    ck_assert_str_eq(c.advisory, "");
}
END_TEST

/* Instruction classes are static counts of PTX opcodes (predicated or
 * not); commit/wait of async copies and comments are not copies. */
START_TEST(test_ptx_census_counts_instruction_classes) {
    static const char ptx[] =
        "//\n// mma.sync in a comment\n.visible .entry k(\n)\n{\n"
        "\tld.global.nc.v4.u32 \t{%r1, %r2, %r3, %r4}, [%rd1];\n"
        "\tld.global.v2.f32 \t{%f1, %f2}, [%rd2];\n"
        "\t@%p1 ld.global.f32 \t%f3, [%rd3];\n"
        "\tld.shared.v4.f32 \t{%f1, %f2, %f3, %f4}, [%r9];\n"
        "\tst.global.v4.f32 \t[%rd4], {%f1, %f2, %f3, %f4};\n"
        "\t@!%p2 st.global.u16 \t[%rd5], %rs1;\n"
        "\tmma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1,%f2,%f3,%f4}, {%r1,%r2,%r3,%r4}, {%r5,%r6}, {%f1,%f2,%f3,%f4};\n"
        "\twgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {...};\n"
        "\tldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1, %r2, %r3, %r4}, [%r7];\n"
        "\tcp.async.cg.shared.global [%r8], [%rd6], 16;\n"
        "\tcp.async.commit_group;\n\tcp.async.wait_group 0;\n"
        "\tcp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd7, {%r2, %r3}], [%r4];\n"
        "\tcp.async.bulk.commit_group;\n"
        "$L__BB0_2:\n\tret;\n}\n";
    mcir_kernel_audit a;
    memset(&a, 0, sizeof a);
    cg_ptx_census(ptx, &a);
    ck_assert_int_eq(a.mma, 1);
    ck_assert_int_eq(a.wgmma, 1);
    ck_assert_int_eq(a.ldmatrix, 1);
    ck_assert_int_eq(a.cp_async, 1);
    ck_assert_int_eq(a.cp_async_bulk, 1);
    ck_assert_int_eq(a.ld_global[0], 1);
    ck_assert_int_eq(a.ld_global[1], 1);
    ck_assert_int_eq(a.ld_global[2], 1);
    ck_assert_int_eq(a.st_global[0], 1);
    ck_assert_int_eq(a.st_global[1], 0);
    ck_assert_int_eq(a.st_global[2], 1);
}
END_TEST

/* The main loops: for each matrix instruction or copy the innermost loop
 * holding it, less an item loop around a K loop that holds only a peeled
 * step of it; a K loop counts whole with its load loop inside. */
START_TEST(test_ptx_census_finds_the_main_loops) {
    static const char ptx[] =
        ".visible .entry k(\n)\n{\n"
        "\tld.global.u32 \t%r1, [%rd1];\n"             /* before any loop */
        "$L__BB0_1:\n"                                  /* the item loop */
        "\twgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {...};\n"   /* peeled step */
        "$L__BB0_2:\n"                                  /* the K loop */
        "\twgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {...};\n"
        "\tcvt.u32.u64 \t%r2, %rd2;\n"
        "\t@%p1 bra \t$L__BB0_2;\n"
        "\tst.global.f32 \t[%rd3], %f1;\n"             /* the epilogue, in the item loop */
        "\t@%p2 bra.uni \t$L__BB0_1;\n"
        "$L__BB0_3:\n"                                  /* an sm_80 K loop ... */
        "\tmma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {...};\n"
        "\tldmatrix.sync.aligned.m8n8.x4.shared.b16 {...}, [%r7];\n"
        "$L__BB0_4:\n"                                  /* ... with its load loop inside */
        "\tcp.async.cg.shared.global [%r8], [%rd6], 16;\n"
        "\t@%p3 bra \t$L__BB0_4;\n"
        "\tst.shared.u32 \t[%r9], %r1;\n"
        "\t@%p4 bra \t$L__BB0_3;\n"
        "$L__BB0_5:\n"                                  /* a loop with no matrix work */
        "\tld.global.u32 \t%r1, [%rd1];\n"
        "\t@%p5 bra \t$L__BB0_5;\n"
        "\tret;\n}\n";
    mcir_kernel_audit a;
    memset(&a, 0, sizeof a);
    cg_ptx_census(ptx, &a);
    ck_assert_int_eq(a.wgmma, 2);
    ck_assert_int_eq(a.ld_global[0], 2);
    ck_assert_int_eq(a.mainloop.loops, 2);          /* the wgmma K loop, the sm_80 K loop */
    ck_assert_int_eq(a.mainloop.wgmma, 1);          /* not the peeled step */
    ck_assert_int_eq(a.mainloop.st_global, 0);      /* not the epilogue */
    ck_assert_int_eq(a.mainloop.ld_global, 0);      /* nor the plain loop's load */
    ck_assert_int_eq(a.mainloop.cvt, 1);
    ck_assert_int_eq(a.mainloop.mma, 1);
    ck_assert_int_eq(a.mainloop.ldmatrix, 1);
    ck_assert_int_eq(a.mainloop.cp_async, 1);
    ck_assert_int_eq(a.mainloop.st_shared, 1);
    ck_assert_int_eq(a.mainloop.instructions, 3 + 6);   /* branches included */
}
END_TEST

/* Theoretical occupancy by the occupancy calculator's rules. */
START_TEST(test_occupancy_from_target_table) {
    static const struct {
        const char *arch;
        int threads, regs, smem_static;
        int64_t smem_dynamic;
        int blocks;
        const char *limit;
        double fraction;
    } occ[] = {
        {"sm_90", 128, 128, 0, 24704, 4, "registers", 0.25},     /* 4096 regs/warp: 4 warps per partition */
        {"sm_90", 256, 40, 8704, 0, 6, "registers", 0.75},       /* 1280 regs/warp: 12 per partition */
        {"sm_90", 32, 16, 0, 0, 32, "blocks", 0.5},               /* 32 blocks of one warp */
        {"sm_90", 128, 32, 0, 100 * 1024, 2, "shared memory", 0.125},  /* 101 KiB per block in 228 */
        {"sm_86", 1024, 32, 0, 0, 1, "warps", 32.0 / 48.0},       /* 48 warps per SM */
        {"sm_89", 64, 24, 0, 0, 24, "blocks", 1.0},
        {"sm_80", 1024, 255, 0, 0, 0, "registers", 0.0},         /* cannot launch */
    };
    for (size_t i = 0; i < sizeof occ / sizeof *occ; i++) {
        mcir_compiled c;
        memset(&c, 0, sizeof c);
        c.registers = occ[i].regs;
        c.smem_static_bytes = occ[i].smem_static;
        c.ptx = (char *)"";
        mcir_kernel_audit a;
        cg_audit_fill(&a, &c, "k", occ[i].threads, occ[i].smem_dynamic, mcir_target_find(occ[i].arch));
        ck_assert_msg(a.blocks_per_sm == occ[i].blocks && !strcmp(a.occupancy_limit, occ[i].limit),
                      "case %zu: %d blocks (%s)", i, a.blocks_per_sm, a.occupancy_limit);
        ck_assert_double_eq_tol(a.occupancy, occ[i].fraction, 1e-9);
    }
}
END_TEST

START_TEST(test_write_cuda_and_dir) {
    need_nvrtc();
    mcir_graph *g = cgt_graph(TINY);
    mcir_plan *p = cgt_plan_naive(g, "sm_90");
    mcir_diag d = mcir_diag_stderr();
    mcir_codegen *cg = mcir_codegen_new(p, NULL, &d);
    ck_assert(mcir_codegen_compile(cg, "sm_90", &d));
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    ck_assert(mcir_codegen_write_cuda(cg, f));
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "// kernel tiny_r (elementwise)"));
    ck_assert_ptr_nonnull(strstr(buf, "extern \"C\" __global__"));
    free(buf);
    f = open_memstream(&buf, &n);
    ck_assert(mcir_codegen_write_ptx(cg, f));
    fclose(f);
    ck_assert_ptr_nonnull(strstr(buf, "// kernel tiny_r (entry mc_elementwise_"));
    char entry[96];
    snprintf(entry, sizeof entry, ".entry %s(", mcir_codegen_kernel_entry(cg, 0));
    ck_assert_ptr_nonnull(strstr(buf, entry));
    free(buf);
    char dir[400], path[600];
    snprintf(dir, sizeof dir, "%s/out", cache_dir);
    ck_assert(mcir_codegen_write_dir(cg, dir, &d));
    struct stat st;
    snprintf(path, sizeof path, "%s/kernels/tiny_r.cu", dir);
    ck_assert_int_eq(stat(path, &st), 0);
    snprintf(path, sizeof path, "%s/kernels/tiny_r.ptx", dir);
    ck_assert_int_eq(stat(path, &st), 0);
    mcir_codegen_free(cg);
    mcir_graph_free(g);
}
END_TEST

/* ------------------------------------------------------ bundled examples */

#ifdef MCIR_HAVE_PIPELINE
#include "pipeline_test.h"
static const char *planner_name = "the mcirc pipeline";
#elif defined(MCIR_HAVE_KERNELPLAN)
static const char *planner_name = "kernelplan";
#else
static const char *planner_name = "one kernel per node";
#endif

#ifndef MCIR_HAVE_PIPELINE
static mcir_plan *plan_example(mcir_graph *g, const char *arch, mcir_plan **own, mcir_diag *d) {
    *own = NULL;
#ifdef MCIR_HAVE_KERNELPLAN
    mcir_plan *p = mcir_plan_build(g, mcir_target_find(arch), NULL, d);
    ck_assert_msg(p != NULL, "kernel planner failed on %s", g->name);
    *own = p;
    return p;
#else
    (void)d;
    return cgt_plan_naive(g, arch);
#endif
}
#endif

/* Every example's kernels are generated and compile (sm_90; two workers,
 * one example at a time each). */
typedef struct ex_job {
    char names[64][256];
    int n, next, kernels, failed;
    const char *dir;
    pthread_mutex_t mu;
} ex_job;

/* The static audit of an example's kernel: compiled, no spills (the
 * epilogue kernel's neither), static + dynamic shared memory within the
 * target's opt-in limit, and f16/bf16 attention on tensor cores. */
static bool audit_ok(const char *example, const mcir_kernel_plan *kp, const mcir_target *t) {
    const mcir_kernel_audit *as[2] = {&kp->audit, &kp->epilogue_audit};
    bool ok = kp->audit.valid;
    for (int i = 0; i < 2; i++) {
        const mcir_kernel_audit *a = as[i];
        if (!a->valid) continue;
        if (a->spill_store_bytes || a->spill_load_bytes) {
            fprintf(stderr, "%s: %s%s spills %d B stored, %d B loaded\n", example, kp->name,
                    i ? " (epilogue)" : "", a->spill_store_bytes, a->spill_load_bytes);
            ok = false;
        }
        if (a->smem_static_bytes + a->smem_dynamic_bytes > t->smem_per_block_optin ||
            a->smem_static_bytes > t->smem_per_block || a->blocks_per_sm < 1) {
            fprintf(stderr, "%s: %s does not fit an SM of %s\n", example, kp->name, t->name);
            ok = false;
        }
    }
    mcir_dtype dt = kp->anchor && kp->anchor->n_inputs ? kp->anchor->inputs[0]->dtype : MCIR_DTYPE_F32;
    if (kp->tpl == MCIR_TEMPLATE_STREAMING_ATTENTION && dt != MCIR_DTYPE_F32 && kp->audit.mma == 0 &&
        kp->audit.wgmma == 0) {
        fprintf(stderr, "%s: %s (%s attention) has no tensor-core instruction\n", example, kp->name,
                mcir_dtype_name(dt));
        ok = false;
    }
    return ok;
}

static void *example_worker(void *arg) {
    ex_job *j = arg;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        int i = j->next++;
        pthread_mutex_unlock(&j->mu);
        if (i >= j->n) return NULL;
        char path[1400];
        snprintf(path, sizeof path, "%s/%s/graph.json", j->dir, j->names[i]);
        int kernels = 0;
        bool ok;
#ifdef MCIR_HAVE_PIPELINE
        /* as mcirc compiles it: rewrites, planner, codegen, NVRTC (a
         * failure is counted below, not a failed check: a worker thread) */
        mcir_compilation c;
        ok = cgt_compile_status(path, (cgt_pipe){.arch = "sm_90", .cuda = true, .ptx = true}, &c) == 0 &&
             c.codegen && c.plan;
        mcir_plan *p = ok ? c.plan : NULL;
        mcir_codegen *cg = ok ? c.codegen : NULL;
#else
        mcir_diag d = mcir_diag_stderr();
        mcir_graph *g = mcir_graph_read_json(path, &d);
        ok = g != NULL;
        mcir_plan *own = NULL, *p = NULL;
        mcir_codegen *cg = NULL;
        if (ok) {
            p = plan_example(g, "sm_90", &own, &d);
            cg = mcir_codegen_new(p, NULL, &d);
            ok = cg && mcir_codegen_compile(cg, "sm_90", &d);
        }
#endif
        if (ok)
            for (int k = 0; k < p->n_kernels; k++) {
                if (!mcir_codegen_kernel_source(cg, k)) continue;
                kernels++;
                if (p->kernels[k].registers <= 0) ok = false;
                if (!audit_ok(j->names[i], &p->kernels[k], p->target)) ok = false;
                if (getenv("MCIR_SWEEP_VERBOSE"))
                    fprintf(stderr, "  %-16s %-44s %-20s regs %3d spill %d\n", j->names[i], p->kernels[k].name,
                            cg_template_label(p->kernels[k].tpl), p->kernels[k].registers,
                            p->kernels[k].spill_bytes);
            }
#ifdef MCIR_HAVE_PIPELINE
        if (ok && !strcmp(j->names[i], "gpt2_stack")) {
            /* 12 identical layers: a cold compile makes one NVRTC call per
             * distinct source, at most 15 (issue 13) */
            mcir_compile_stats st;
            mcir_codegen_compile_stats(cg, &st);
            fprintf(stderr, "gpt2_stack: %d kernels, %d distinct sources, %d NVRTC compiles, %d cache hits\n",
                    st.kernels, st.units, st.nvrtc_compiles, st.cache_hits);
            if (st.units > 15 || st.kernels < 12 * 8 || st.nvrtc_compiles + st.cache_hits != st.units)
                ok = false;
        }
        if (ok) {   /* every compiled kernel's audit reaches plan.json */
            char *buf = NULL;
            size_t n = 0;
            FILE *f = open_memstream(&buf, &n);
            ok = mcir_plan_write_json(p, f);
            fclose(f);
            int audits = 0;
            for (const char *q = buf; (q = strstr(q, "\"audit\": {")); q++) audits++;
            if (audits != kernels || !strstr(buf, "\"spill_store_bytes\"") ||
                !strstr(buf, "\"blocks_per_sm\"") || !strstr(buf, "\"ld_global\": {")) {
                fprintf(stderr, "%s: %d audits in plan.json for %d kernels\n", j->names[i], audits, kernels);
                ok = false;
            }
            free(buf);
        }
#endif
        if (!ok) fprintf(stderr, "FAILED: example %s\n", j->names[i]);
#ifdef MCIR_HAVE_PIPELINE
        mcir_compilation_free(&c);
#else
        mcir_codegen_free(cg);
#ifdef MCIR_HAVE_KERNELPLAN
        if (own) mcir_plan_free(own);
#endif
        if (g) mcir_graph_free(g);
#endif
        pthread_mutex_lock(&j->mu);
        j->kernels += kernels;
        j->failed += !ok;
        pthread_mutex_unlock(&j->mu);
    }
}

START_TEST(test_examples_emit_and_compile) {
    need_nvrtc();
    char dir[1024], path[1400];
    snprintf(dir, sizeof dir, "%s/examples", test_source_dir());
    DIR *dd = opendir(dir);
    ck_assert_ptr_nonnull(dd);
    static ex_job j;
    memset(&j, 0, sizeof j);
    pthread_mutex_init(&j.mu, NULL);
    j.dir = dir;
    struct dirent *e;
    while ((e = readdir(dd)) && j.n < 64) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s/graph.json", dir, e->d_name);
        if (access(path, R_OK) != 0) continue;
        snprintf(j.names[j.n++], sizeof j.names[0], "%s", e->d_name);
    }
    closedir(dd);
    double t0 = now_s();
    pthread_t th[2];
    for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, example_worker, &j);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    fprintf(stderr, "examples (%s): %d graphs, %d kernels for sm_90, %.1f s\n", planner_name, j.n,
            j.kernels, now_s() - t0);
    ck_assert_int_gt(j.n, 0);
    ck_assert_int_eq(j.failed, 0);
}
END_TEST

/* Every --arch the CLI documents compiles (attention, the largest template). */
START_TEST(test_all_documented_archs) {
    need_nvrtc();
    static const char *archs[] = {"sm_80", "sm_86", "sm_89", "sm_90"};
    mcir_graph *g = cgt_graph(
        "{\"mcir\":1,\"name\":\"archs\",\"inputs\":[{\"name\":\"q\",\"dtype\":\"bf16\",\"shape\":[1,2,77,80]},"
        "{\"name\":\"k\",\"dtype\":\"bf16\",\"shape\":[1,2,96,80]},{\"name\":\"v\",\"dtype\":\"bf16\",\"shape\":[1,2,96,80]}],"
        "\"nodes\":[{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\"],\"outputs\":[\"y\"],"
        "\"attrs\":{\"causal\":true}}],\"outputs\":[\"y\"]}");
    for (int a = 0; a < 4; a++) {
        mcir_plan *p = cgt_plan_naive(g, archs[a]);
        mcir_diag d = mcir_diag_stderr();
        mcir_codegen *cg = mcir_codegen_new(p, NULL, &d);
        ck_assert_ptr_nonnull(cg);
        ck_assert_msg(mcir_codegen_compile(cg, archs[a], &d), "%s", archs[a]);
        ck_assert_int_gt(p->kernels[0].registers, 0);
        const char *ptx = mcir_codegen_kernel_ptx(cg, 0);
        char target[32];
        snprintf(target, sizeof target, ".target %s", archs[a]);
        ck_assert_ptr_nonnull(strstr(ptx, target));
        ck_assert_ptr_nonnull(strstr(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"));
        const mcir_kernel_audit *au = &p->kernels[0].audit;
        ck_assert(au->valid);
        ck_assert_int_gt(au->mma, 0);
        ck_assert_int_eq(au->spill_store_bytes + au->spill_load_bytes, 0);
        ck_assert_int_eq(au->registers, p->kernels[0].registers);
        ck_assert_int_ge(au->blocks_per_sm, 1);
        mcir_codegen_free(cg);
    }
    mcir_graph_free(g);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("codegen");
    TCase *tc = tcase_create("codegen");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_cache_dir_from_environment);
    tcase_add_test(tc, test_ptxas_report_parsed);
    tcase_add_test(tc, test_compile_unit_ignores_names);
    tcase_add_test(tc, test_identical_sources_compile_once);
    tcase_add_test(tc, test_ptxas_report_entry_and_callee);
    tcase_add_test(tc, test_ptxas_report_advisories_and_merge_entry);
    tcase_add_test(tc, test_ptx_census_counts_instruction_classes);
    tcase_add_test(tc, test_ptx_census_finds_the_main_loops);
    tcase_add_test(tc, test_occupancy_from_target_table);
    tcase_add_test(tc, test_syntax_error_reports_log_and_line);
    tcase_add_test(tc, test_write_cuda_and_dir);
    tcase_add_test(tc, test_all_documented_archs);
    tcase_add_test(tc, test_cache_second_compile_skips_nvrtc);
    tcase_add_test(tc, test_sweep_compiles_for_sm80_and_sm90);
    tcase_add_test(tc, test_examples_emit_and_compile);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    cgt_temp_cache(cache_dir, sizeof cache_dir);
    int failed = test_main_nofork(suite());
    test_remove_dir(cache_dir);
    return failed;
}

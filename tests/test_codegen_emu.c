/*
 * test_codegen_emu.c — the generated kernels executed on the CPU: each
 * kernel's CUDA source is compiled as C++ against tests/cuda_emu.h (threads
 * as coroutines, real barriers and warp shuffles, the mma.sync fragment
 * layout emulated) and run over host buffers laid out like device memory;
 * the outputs must match the reference interpreter with the GPU test's
 * tolerances (1e-3 relative for f32, 2e-2 for f16/bf16). This exercises the
 * templates' index math, bounds checks, tiling, online softmax and
 * reductions where no GPU exists. Grids are capped at a few blocks (every
 * template is a grid-stride loop, so this also tests the stride logic).
 * Skips (77) without a C++ compiler.
 */
#include <check.h>
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen_util.h"

static char work_dir[256];
static int compiled_count;

typedef int (*emu_run_fn)(void (*)(void **), void **, unsigned, unsigned, size_t);

static const char *src_dir(void) {
    const char *s = getenv("MCIR_SOURCE_DIR");
    return s ? s : "..";
}

static const char *ctype(mcir_dtype t) { return t == MCIR_DTYPE_F32 ? "float" : "unsigned short"; }

/* Compiles one kernel into a shared object; returns the dlopen handle.
 * name: the kernel function (the plan's name, or its epilogue's); with
 * acc, the launcher passes one more pointer, the staged product. */
static void *compile_emulated(const mcir_kernel_plan *kp, const char *name, const char *source, bool acc) {
    char cpp[600], so[600], cmd[2400];
    /* one shared object per distinct source: kernels shared by both modes
     * of run_emulated are compiled once */
    uint64_t h = 1469598103934665603ull;
    for (const char *c = source; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    for (const char *c = name; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    snprintf(cpp, sizeof cpp, "%s/%s_%016llx.cpp", work_dir, name, (unsigned long long)h);
    snprintf(so, sizeof so, "%s/%s_%016llx.so", work_dir, name, (unsigned long long)h);
    if (access(so, R_OK) == 0) {
        void *again = dlopen(so, RTLD_NOW | RTLD_LOCAL);
        if (again) return again;
    }
    FILE *f = fopen(cpp, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "#include \"cuda_emu.h\"\n%s\nextern \"C\" void emu_launch(void **a) {\n    %s(", source, name);
    for (int i = 0; i < kp->n_reads; i++)
        fprintf(f, "%s(const %s*)a[%d]", i ? ", " : "", ctype(kp->reads[i]->dtype), i);
    for (int i = 0; i < kp->n_writes; i++)
        fprintf(f, "%s(%s*)a[%d]", kp->n_reads + i ? ", " : "", ctype(kp->writes[i]->dtype),
                kp->n_reads + i);
    if (kp->n_reads + kp->n_writes == 0) fprintf(f, "0");
    if (acc) fprintf(f, ", (const float*)a[%d]", kp->n_reads + kp->n_writes);
    fprintf(f, ");\n}\n");
    fclose(f);
    /* in the sanitizer build the kernels are instrumented too: an
     * out-of-bounds load or store of a generated kernel is reported */
#if defined(__SANITIZE_ADDRESS__)
    const char *san = "-fsanitize=address -fno-omit-frame-pointer";
#else
    const char *san = "";
#endif
    snprintf(cmd, sizeof cmd, "c++ -std=c++17 -O1 -w -shared -fPIC %s -I%s/tests -o %s %s", san, src_dir(), so, cpp);
    if (system(cmd) != 0) {
        fprintf(stderr, "emulated compile failed: %s\n", cmd);
        return NULL;
    }
    compiled_count++;
    void *lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!lib) fprintf(stderr, "dlopen: %s\n", dlerror());
    return lib;
}

static void *to_storage(const mcir_tensor *t, const float *v) {
    int64_t n = mcir_tensor_numel(t);
    void *out = malloc((size_t)mcir_tensor_bytes(t));
    if (t->dtype == MCIR_DTYPE_F32) memcpy(out, v, (size_t)n * 4);
    else
        for (int64_t i = 0; i < n; i++)
            ((uint16_t *)out)[i] = t->dtype == MCIR_DTYPE_F16 ? mcir_f32_to_f16(v[i]) : mcir_f32_to_bf16(v[i]);
    return out;
}

/* via_epilogue: MATMUL kernels that have one run as the runtime runs them
 * with cuBLAS: the product (the reference's value of the matmul output)
 * staged in f32, then the generated epilogue kernel. */
static bool run_emulated(mcir_graph *g, mcir_plan *p, const char *what, bool via_epilogue) {
    mcir_diag d = mcir_diag_stderr();
    mcir_codegen *cg = mcir_codegen_new(p, NULL, &d);
    ck_assert_msg(cg != NULL, "%s: codegen failed", what);
    mcir_env *cpu = mcir_env_new(g, 3);
    mcir_env_keep_all(cpu, true);
    for (int i = 0; i < g->n_inputs; i++) {
        float *v = malloc(sizeof(float) * (size_t)mcir_tensor_numel(g->inputs[i]));
        mcir_fill_seeded(g->inputs[i], 3, v);
        mcir_env_set(cpu, g->inputs[i], v);
        free(v);
    }
    ck_assert(mcir_interp_run(g, cpu, &d));
    /* host "device memory" per root tensor */
    void **mem = calloc((size_t)g->n_tensors, sizeof *mem);
    for (int t = 0; t < g->n_tensors; t++) {
        const mcir_tensor *x = g->tensors[t];
        if (p->alias_root[t] != x) continue;
        if (x->kind == MCIR_TENSOR_INPUT || x->kind == MCIR_TENSOR_WEIGHT) {
            mem[t] = to_storage(x, mcir_env_get(cpu, x));
        } else {
            mem[t] = malloc((size_t)mcir_tensor_bytes(x));
            memset(mem[t], 0xff, (size_t)mcir_tensor_bytes(x));   /* NaN garbage */
        }
    }
    bool ok = true;
    for (int i = 0; i < p->n_kernels && ok; i++) {
        const mcir_kernel_plan *kp = &p->kernels[i];
        const char *src = mcir_codegen_kernel_source(cg, i);
        if (!src) continue;
        const char *epi_name = NULL;
        int64_t epi_grid = 0;
        const char *epi = mcir_codegen_kernel_epilogue(cg, i, &epi_name, &epi_grid);
        bool staged = via_epilogue && epi;
        void *h = staged ? compile_emulated(kp, epi_name, epi, true) : compile_emulated(kp, kp->name, src, false);
        ck_assert_ptr_nonnull(h);
        emu_run_fn run = (emu_run_fn)dlsym(h, "emu_run");
        void (*launch)(void **) = (void (*)(void **))dlsym(h, "emu_launch");
        ck_assert(run && launch);
        void *args[64];
        int na = 0;
        for (int j = 0; j < kp->n_reads; j++) args[na++] = mem[p->alias_root[kp->reads[j]->id]->id];
        for (int j = 0; j < kp->n_writes; j++) args[na++] = mem[p->alias_root[kp->writes[j]->id]->id];
        int64_t grid[3], smem;
        int block[3];
        mcir_codegen_kernel_launch(cg, i, grid, block, &smem);
        float *product = NULL;
        if (staged) {
            product = mcir_env_get(cpu, kp->anchor->outputs[0]);
            ck_assert_ptr_nonnull(product);
            args[na++] = product;
            grid[0] = epi_grid;
            block[0] = 256;
            smem = 0;
        }
        unsigned gx = (unsigned)(grid[0] < 3 ? grid[0] : 3);
        if (run(launch, args, gx, (unsigned)block[0], (size_t)smem) != 0) ok = false;
        dlclose(h);
    }
    for (int j = 0; j < g->n_outputs && ok; j++) {
        const mcir_tensor *t = g->outputs[j];
        const void *raw = mem[p->alias_root[t->id]->id];
        const float *c = mcir_env_get(cpu, t);
        int64_t n = mcir_tensor_numel(t), worst = 0;
        double maxref = 0, maxerr = 0;
        for (int64_t k = 0; k < n; k++) {
            float v = t->dtype == MCIR_DTYPE_F32 ? ((const float *)raw)[k]
                      : t->dtype == MCIR_DTYPE_F16 ? mcir_f16_to_f32(((const uint16_t *)raw)[k])
                                                   : mcir_bf16_to_f32(((const uint16_t *)raw)[k]);
            if (fabs(c[k]) > maxref) maxref = fabs(c[k]);
            double e = isnan(v) != isnan(c[k]) ? INFINITY : fabs((double)v - (double)c[k]);
            if (isnan(v) && isnan(c[k])) e = 0;
            if (e > maxerr) { maxerr = e; worst = k; }
        }
        double rel = maxerr / (maxref > 1e-6 ? maxref : 1e-6);
        double tol = t->dtype == MCIR_DTYPE_F32 ? 1e-3 : 2e-2;
        float wv = t->dtype == MCIR_DTYPE_F32 ? ((const float *)raw)[worst]
                   : t->dtype == MCIR_DTYPE_F16 ? mcir_f16_to_f32(((const uint16_t *)raw)[worst])
                                                : mcir_bf16_to_f32(((const uint16_t *)raw)[worst]);
        fprintf(stderr, "  %-28s%s %-6s %s rel err %.3g (at %lld: cpu %g emu %g)\n", what,
                via_epilogue ? " (cuBLAS+epilogue)" : "", t->name,
                rel <= tol ? "ok  " : "FAIL", rel, (long long)worst, c[worst], wv);
        if (!(rel <= tol)) ok = false;
    }
    for (int t = 0; t < g->n_tensors; t++) free(mem[t]);
    free(mem);
    mcir_env_free(cpu);
    mcir_codegen_free(cg);
    return ok;
}

#define ATT(name, dt, nq, nk, d, dv, extra_in, extra_arg, attrs)                                        \
    "{\"mcir\":1,\"name\":\"" name "\",\"inputs\":[{\"name\":\"q\",\"dtype\":\"" dt "\",\"shape\":[1,2," #nq "," #d "]},"     \
    "{\"name\":\"k\",\"dtype\":\"" dt "\",\"shape\":[1,2," #nk "," #d "]},{\"name\":\"v\",\"dtype\":\"" dt "\",\"shape\":[1,2," #nk "," #dv "]}" \
    extra_in "],\"nodes\":[{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\"" extra_arg "],\"outputs\":[\"y\"]," \
    "\"attrs\":{" attrs "}}],\"outputs\":[\"y\"]}"

static const char *const ATTENTION[] = {
    ATT("e_att_f16_c", "f16", 77, 96, 80, 80, "", "", "\"causal\":true"),
    ATT("e_att_bf16_m", "bf16", 33, 70, 64, 64, ",{\"name\":\"m\",\"dtype\":\"bf16\",\"shape\":[1,1,33,70]}", ",\"m\"", "\"causal\":false"),
    ATT("e_att_f16_nq_gt_nk", "f16", 40, 24, 32, 32, "", "", "\"causal\":true"),
    ATT("e_att_f32_c", "f32", 33, 50, 40, 24, "", "", "\"causal\":true"),
    ATT("e_att_f32_m", "f32", 20, 37, 64, 64, ",{\"name\":\"m\",\"dtype\":\"f32\",\"shape\":[37]}", ",\"m\"", "\"scale\":0.3"),
};

START_TEST(test_attention_emulated) {
    int failed = 0;
    for (size_t i = 0; i < sizeof ATTENTION / sizeof *ATTENTION; i++) {
        mcir_graph *g = cgt_graph(ATTENTION[i]);
        mcir_plan *p = cgt_plan_naive(g, "sm_90");
        if (!run_emulated(g, p, g->name, false)) failed++;
        mcir_graph_free(g);
    }
    ck_assert_int_eq(failed, 0);
}
END_TEST

START_TEST(test_attention_head_split_merge_emulated) {
    static const char *dts[] = {"f32", "f16"};
    int failed = 0;
    for (int t = 0; t < 2; t++) {
        char json[4096];
        snprintf(json, sizeof json,
                 "{\"mcir\":1,\"name\":\"e_mha_%s\",\"inputs\":["
                 "{\"name\":\"xq\",\"dtype\":\"%s\",\"shape\":[2,21,96]},{\"name\":\"xk\",\"dtype\":\"%s\",\"shape\":[2,35,96]},"
                 "{\"name\":\"xv\",\"dtype\":\"%s\",\"shape\":[2,35,96]}],\"nodes\":["
                 "{\"name\":\"rq\",\"op\":\"reshape\",\"inputs\":[\"xq\"],\"outputs\":[\"q4\"],\"attrs\":{\"shape\":[2,21,3,32]}},"
                 "{\"name\":\"tq\",\"op\":\"transpose\",\"inputs\":[\"q4\"],\"outputs\":[\"q\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
                 "{\"name\":\"rk\",\"op\":\"reshape\",\"inputs\":[\"xk\"],\"outputs\":[\"k4\"],\"attrs\":{\"shape\":[2,35,3,32]}},"
                 "{\"name\":\"tk\",\"op\":\"transpose\",\"inputs\":[\"k4\"],\"outputs\":[\"k\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
                 "{\"name\":\"rv\",\"op\":\"reshape\",\"inputs\":[\"xv\"],\"outputs\":[\"v4\"],\"attrs\":{\"shape\":[2,35,3,32]}},"
                 "{\"name\":\"tv\",\"op\":\"transpose\",\"inputs\":[\"v4\"],\"outputs\":[\"v\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
                 "{\"name\":\"at\",\"op\":\"attention\",\"inputs\":[\"q\",\"k\",\"v\"],\"outputs\":[\"o\"],\"attrs\":{\"causal\":true}},"
                 "{\"name\":\"to\",\"op\":\"transpose\",\"inputs\":[\"o\"],\"outputs\":[\"o4\"],\"attrs\":{\"perm\":[0,2,1,3]}},"
                 "{\"name\":\"ro\",\"op\":\"reshape\",\"inputs\":[\"o4\"],\"outputs\":[\"y\"],\"attrs\":{\"shape\":[2,21,96]}}],"
                 "\"outputs\":[\"y\"]}", dts[t], dts[t], dts[t], dts[t]);
        mcir_graph *g = cgt_graph(json);
        cgt_kspec ks[] = {{MCIR_TEMPLATE_STREAMING_ATTENTION, "at", "rq,tq,rk,tk,rv,tv,at,to,ro"}};
        mcir_plan *p = cgt_plan(g, "sm_90", 1, ks);
        if (!run_emulated(g, p, g->name, false)) failed++;
        mcir_graph_free(g);
    }
    ck_assert_int_eq(failed, 0);
}
END_TEST

static const char *const MISC[] = {
    /* norms with a fused prologue / epilogue, warp rows and block rows */
    "{\"mcir\":1,\"name\":\"e_norms\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[5,77]},"
    "{\"name\":\"r\",\"dtype\":\"f32\",\"shape\":[5,77]},{\"name\":\"g\",\"dtype\":\"f32\",\"shape\":[77]},"
    "{\"name\":\"b\",\"dtype\":\"f32\",\"shape\":[77]},{\"name\":\"w\",\"dtype\":\"f32\",\"shape\":[3,3000]},"
    "{\"name\":\"gw\",\"dtype\":\"f32\",\"shape\":[3000]}],"
    "\"nodes\":[{\"name\":\"sm\",\"op\":\"softmax\",\"inputs\":[\"x\"],\"outputs\":[\"y1\"]},"
    "{\"name\":\"ln\",\"op\":\"layernorm\",\"inputs\":[\"x\",\"g\",\"b\"],\"outputs\":[\"y2\"]},"
    "{\"name\":\"rn\",\"op\":\"rmsnorm\",\"inputs\":[\"x\",\"g\"],\"outputs\":[\"y3\"]},"
    "{\"name\":\"smw\",\"op\":\"softmax\",\"inputs\":[\"w\"],\"outputs\":[\"y4\"]},"
    "{\"name\":\"lnw\",\"op\":\"layernorm\",\"inputs\":[\"w\",\"gw\"],\"outputs\":[\"y5\"]},"
    "{\"name\":\"sm1\",\"op\":\"softmax\",\"inputs\":[\"r\"],\"outputs\":[\"y6\"],\"attrs\":{\"axis\":0}}],"
    "\"outputs\":[\"y1\",\"y2\",\"y3\",\"y4\",\"y5\",\"y6\"]}",
    "{\"mcir\":1,\"name\":\"e_normb\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"bf16\",\"shape\":[4,2,96]},"
    "{\"name\":\"g\",\"dtype\":\"bf16\",\"shape\":[96]}],"
    "\"nodes\":[{\"name\":\"ln\",\"op\":\"layernorm\",\"inputs\":[\"x\",\"g\"],\"outputs\":[\"y1\"],\"attrs\":{\"axis\":-2}},"
    "{\"name\":\"rn\",\"op\":\"rmsnorm\",\"inputs\":[\"x\",\"g\"],\"outputs\":[\"y2\"]}],\"outputs\":[\"y1\",\"y2\"]}",
    /* conv + pools + reductions + copies */
    "{\"mcir\":1,\"name\":\"e_misc\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[2,6,9,11]},"
    "{\"name\":\"w\",\"dtype\":\"f32\",\"shape\":[8,3,3,3]},{\"name\":\"cb\",\"dtype\":\"f32\",\"shape\":[8]}],"
    "\"nodes\":[{\"name\":\"cv\",\"op\":\"conv2d\",\"inputs\":[\"x\",\"w\",\"cb\"],\"outputs\":[\"c\"],"
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
    /* big reduction (block per output) */
    "{\"mcir\":1,\"name\":\"e_bigred\",\"inputs\":[{\"name\":\"x\",\"dtype\":\"f32\",\"shape\":[3,2000]}],"
    "\"nodes\":[{\"name\":\"rs\",\"op\":\"reduce_sum\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{\"axes\":[1]}}],\"outputs\":[\"y\"]}",
};

START_TEST(test_norms_reductions_copies_conv_emulated) {
    int failed = 0;
    for (size_t i = 0; i < sizeof MISC / sizeof *MISC; i++) {
        mcir_graph *g = cgt_graph(MISC[i]);
        mcir_plan *p = cgt_plan_naive(g, "sm_90");
        if (!run_emulated(g, p, g->name, false)) failed++;
        mcir_graph_free(g);
    }
    ck_assert_int_eq(failed, 0);
}
END_TEST

START_TEST(test_fused_chains_emulated) {
    int failed = 0;
    static const char *dts[] = {"f32", "f16", "bf16"};
    for (int t = 0; t < 3; t++) {
        char json[4096];
        snprintf(json, sizeof json,
                 "{\"mcir\":1,\"name\":\"e_fused_%s\",\"inputs\":[{\"name\":\"a\",\"dtype\":\"%s\",\"shape\":[2,37,45]},"
                 "{\"name\":\"b\",\"dtype\":\"%s\",\"shape\":[70,45]},{\"name\":\"bias\",\"dtype\":\"%s\",\"shape\":[70]},"
                 "{\"name\":\"res\",\"dtype\":\"%s\",\"shape\":[2,37,70]},{\"name\":\"g\",\"dtype\":\"%s\",\"shape\":[70]}],"
                 "\"nodes\":[{\"name\":\"mm\",\"op\":\"matmul\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"c\"],\"attrs\":{\"transpose_b\":true}},"
                 "{\"name\":\"ad\",\"op\":\"add\",\"inputs\":[\"c\",\"bias\"],\"outputs\":[\"h\"]},"
                 "{\"name\":\"ge\",\"op\":\"gelu\",\"inputs\":[\"h\"],\"outputs\":[\"h2\"],\"attrs\":{\"approximate\":\"tanh\"}},"
                 "{\"name\":\"r\",\"op\":\"add\",\"inputs\":[\"h2\",\"res\"],\"outputs\":[\"h3\"]},"
                 "{\"name\":\"ln\",\"op\":\"rmsnorm\",\"inputs\":[\"h3\",\"g\"],\"outputs\":[\"z\"]},"
                 "{\"name\":\"si\",\"op\":\"silu\",\"inputs\":[\"z\"],\"outputs\":[\"z2\"]},"
                 "{\"name\":\"pw\",\"op\":\"pow\",\"inputs\":[\"z2\",\"g\"],\"outputs\":[\"z3\"]},"
                 "{\"name\":\"mx\",\"op\":\"max\",\"inputs\":[\"z3\",\"z\"],\"outputs\":[\"y\"]}],"
                 "\"outputs\":[\"y\",\"h2\"]}", dts[t], dts[t], dts[t], dts[t], dts[t], dts[t]);
        mcir_graph *g = cgt_graph(json);
        cgt_kspec ks[] = {{MCIR_TEMPLATE_MATMUL, "mm", "mm,ad,ge,r"},
                          {MCIR_TEMPLATE_STREAMING_NORM, "ln", "ln,si"},
                          {MCIR_TEMPLATE_ELEMENTWISE, NULL, "pw,mx"}};
        mcir_plan *p = cgt_plan(g, "sm_90", 3, ks);
        if (!run_emulated(g, p, g->name, false)) failed++;
        if (!run_emulated(g, p, g->name, true)) failed++;
        mcir_graph_free(g);
    }
    ck_assert_int_eq(failed, 0);
}
END_TEST

#ifdef MCIR_HAVE_PIPELINE
#include <dirent.h>

#include "mcirc/pipeline.h"

/* Every bundled example through the real pipeline (rewrites, kernel
 * planner with its fusions and folded transposes), each kernel emulated,
 * the outputs against the reference run of the rewritten graph. */
START_TEST(test_examples_emulated) {
    char dir[1024], path[1400];
    snprintf(dir, sizeof dir, "%s/examples", src_dir());
    DIR *dd = opendir(dir);
    ck_assert_ptr_nonnull(dd);
    struct dirent *e;
    int failed = 0, count = 0;
    while ((e = readdir(dd))) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "gpt2_stack") == 0) continue;   /* = 4 x gpt2_block */
        snprintf(path, sizeof path, "%s/%s/graph.json", dir, e->d_name);
        if (access(path, R_OK) != 0) continue;
        mcir_options o = mcir_options_default();
        o.graph_path = path;
        o.want_plan = true;
        o.want_cuda = true;
        mcir_compilation c;
        mcir_diag d = mcir_diag_stderr();
        int st = mcir_compile(&o, &c, &d);
        ck_assert_msg(st == 0, "pipeline failed on %s", e->d_name);
        if (!run_emulated(c.graph, c.plan, e->d_name, false)) failed++;
        if (!run_emulated(c.graph, c.plan, e->d_name, true)) failed++;
        count++;
        mcir_compilation_free(&c);
    }
    closedir(dd);
    ck_assert_int_gt(count, 0);
    ck_assert_int_eq(failed, 0);
}
END_TEST
#endif

int main(void) {
    if (system("c++ --version > /dev/null 2>&1") != 0) {
        printf("skip: no C++ compiler for the kernel emulator\n");
        return 77;
    }
    char tmpl[] = "/tmp/mcir-emu-XXXXXX";
    char *dir = mkdtemp(tmpl);
    if (!dir) return 1;
    snprintf(work_dir, sizeof work_dir, "%s", dir);
    Suite *s = suite_create("codegen_emu");
    TCase *tc = tcase_create("emu");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, test_norms_reductions_copies_conv_emulated);
    tcase_add_test(tc, test_fused_chains_emulated);
    tcase_add_test(tc, test_attention_emulated);
    tcase_add_test(tc, test_attention_head_split_merge_emulated);
#ifdef MCIR_HAVE_PIPELINE
    tcase_add_test(tc, test_examples_emulated);
#endif
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_set_fork_status(r, CK_NOFORK);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    fprintf(stderr, "%d kernels emulated\n", compiled_count);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", work_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", work_dir);
    return failed ? 1 : 0;
}

/*
 * test_catalog.c — the YAML catalog loader: the built-in catalog loads,
 * user files extend or replace it, and every malformed file of the bad
 * corpus (tests/data/catalog/bad, each naming its expected message in its
 * first line) is rejected with "file:line:col: error:" and never crashes,
 * nor do truncated or mutated copies of the built-in catalog.
 */
#include <check.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "catalog/catalog.h"
#include "test_util.h"

/* Diagnostics captured as text. */
typedef struct capture {
    char *text;
    size_t len;
    FILE *f;
    mcir_diag d;
} capture;

static void capture_begin(capture *c) {
    c->text = NULL;
    c->len = 0;
    c->f = open_memstream(&c->text, &c->len);
    ck_assert_ptr_nonnull(c->f);
    c->d = mcir_diag_to(c->f);
}

static void capture_end(capture *c) { fclose(c->f); }

static char *read_text(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return buf;
}

START_TEST(test_default_loads) {
    capture c;
    capture_begin(&c);
    mcir_catalog *cat = mcir_catalog_new();
    bool ok = mcir_catalog_load_default(cat, &c.d);
    capture_end(&c);
    ck_assert_msg(ok, "default catalog: %s", c.text);
    ck_assert_int_eq(c.d.n_errors, 0);
    ck_assert_int_ge(mcir_catalog_n_properties(cat), 4);
    static const char *const props[] = {"weighted_streaming_reduction",
                                        "online_reducible_norm",
                                        "rematerializable_intermediate",
                                        "tile_compatible_compute", "coalescable_buffer"};
    for (int i = 0; i < 5; i++) {
        const mcir_property_decl *p = mcir_catalog_find_property(cat, props[i]);
        ck_assert_msg(p != NULL, "property %s", props[i]);
        ck_assert_ptr_nonnull(p->lowering_strategy);
        ck_assert_int_ge(p->n_rewrite_rules, 1);
    }
    bool seen_attention = false;
    for (int i = 0; i < mcir_catalog_n_patterns(cat); i++) {
        const mcir_pattern *p = mcir_catalog_pattern(cat, i);
        if (strcmp(p->name, "attention_decomposed") == 0) {
            seen_attention = true;
            ck_assert_int_eq(p->action, MCIR_ACTION_FUSE_ATTENTION);
            ck_assert_str_eq(p->property->name, "weighted_streaming_reduction");
            ck_assert_int_ge(p->n_nodes, 5);
            ck_assert_str_eq(p->loc.path, "catalog/default.yaml");
        }
    }
    ck_assert(seen_attention);
    mcir_catalog_free(cat);
    free(c.text);
}
END_TEST

START_TEST(test_default_is_embedded_copy) {
    /* the library carries the bytes of catalog/default.yaml */
    size_t len;
    char *text = read_text(test_path("catalog/default.yaml"), &len);
    ck_assert_uint_eq(len, mcir_catalog_default_yaml_size);
    ck_assert(memcmp(text, mcir_catalog_default_yaml, len) == 0);
    free(text);
}
END_TEST

/* Every file of the bad corpus fails with its expected message. */
START_TEST(test_bad_corpus) {
    const char *dir = test_path("tests/data/catalog/bad");
    DIR *dp = opendir(dir);
    ck_assert_msg(dp != NULL, "no %s", dir);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(dp))) {
        size_t l = strlen(de->d_name);
        if (l < 6 || strcmp(de->d_name + l - 5, ".yaml") != 0) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        size_t len;
        char *text = read_text(path, &len);
        ck_assert_msg(strncmp(text, "# expect: ", 10) == 0, "%s: no '# expect:' line", path);
        char expect[512];
        const char *eol = strchr(text + 10, '\n');
        size_t el = eol ? (size_t)(eol - (text + 10)) : strlen(text + 10);
        snprintf(expect, sizeof expect, "%.*s", (int)el, text + 10);
        free(text);

        capture c;
        capture_begin(&c);
        mcir_catalog *cat = mcir_catalog_new();
        bool ok = mcir_catalog_load_default(cat, &c.d);
        ck_assert(ok);
        int before = mcir_catalog_n_patterns(cat);
        ok = mcir_catalog_load_file(cat, path, &c.d);
        capture_end(&c);
        ck_assert_msg(!ok, "%s loaded but should not", path);
        ck_assert_int_ge(c.d.n_errors, 1);
        /* a failed file adds nothing */
        ck_assert_int_eq(mcir_catalog_n_patterns(cat), before);
        /* GCC style, the file named first */
        ck_assert_msg(strncmp(c.text, path, strlen(path)) == 0 && strstr(c.text, "error: "),
                      "%s: message not 'file:line:col: error:': %s", path, c.text);
        char want[2600];
        if (expect[0] >= '0' && expect[0] <= '9')
            snprintf(want, sizeof want, "%s:%s", path, expect);
        else
            snprintf(want, sizeof want, "%s", expect);
        ck_assert_msg(strstr(c.text, want) != NULL, "%s: expected '%s', got: %s", path, want,
                      c.text);
        mcir_catalog_free(cat);
        free(c.text);
        n++;
    }
    closedir(dp);
    ck_assert_int_ge(n, 30);
}
END_TEST

START_TEST(test_good_files) {
    static const char *const files[] = {"tests/data/catalog/good/extra_relu.yaml",
                                        "tests/data/catalog/good/replace_builtin.yaml"};
    for (int i = 0; i < 2; i++) {
        capture c;
        capture_begin(&c);
        mcir_catalog *cat = mcir_catalog_new();
        bool ok = mcir_catalog_load_default(cat, &c.d) &&
                  mcir_catalog_load_file(cat, test_path(files[i]), &c.d);
        capture_end(&c);
        ck_assert_msg(ok, "%s: %s", files[i], c.text);
        mcir_catalog_free(cat);
        free(c.text);
    }
    /* the user catalog stands alone, without the built-in one */
    capture c;
    capture_begin(&c);
    mcir_catalog *cat = mcir_catalog_new();
    bool ok = mcir_catalog_load_file(cat, test_path("tests/data/catalog/good/user_silu.yaml"), &c.d);
    capture_end(&c);
    ck_assert_msg(ok, "user_silu: %s", c.text);
    ck_assert_int_eq(mcir_catalog_n_patterns(cat), 1);
    ck_assert_str_eq(mcir_catalog_pattern(cat, 0)->name, "my_silu");
    mcir_catalog_free(cat);
    free(c.text);
}
END_TEST

START_TEST(test_replace_keeps_position) {
    mcir_diag d = mcir_diag_stderr();
    mcir_catalog *cat = mcir_catalog_new();
    ck_assert(mcir_catalog_load_default(cat, &d));
    int n = mcir_catalog_n_patterns(cat), at = -1;
    for (int i = 0; i < n; i++)
        if (strcmp(mcir_catalog_pattern(cat, i)->name, "tile_fit") == 0) at = i;
    ck_assert_int_ge(at, 0);
    ck_assert(mcir_catalog_load_file(cat, test_path("tests/data/catalog/good/replace_builtin.yaml"),
                                     &d));
    ck_assert_int_eq(mcir_catalog_n_patterns(cat), n);
    const mcir_pattern *p = mcir_catalog_pattern(cat, at);
    ck_assert_str_eq(p->name, "tile_fit");
    ck_assert(strstr(p->loc.path, "replace_builtin.yaml") != NULL);
    mcir_catalog_free(cat);
}
END_TEST

START_TEST(test_file_missing) {
    capture c;
    capture_begin(&c);
    mcir_catalog *cat = mcir_catalog_new();
    bool ok = mcir_catalog_load_file(cat, "/nonexistent/rules.yaml", &c.d);
    capture_end(&c);
    ck_assert(!ok);
    ck_assert(strstr(c.text, "/nonexistent/rules.yaml: error: cannot open catalog") != NULL);
    mcir_catalog_free(cat);
    free(c.text);
}
END_TEST

/* The op regex is compiled once and matched against every op name. */
START_TEST(test_regex_op_set) {
    const char *yaml =
        "mcir_catalog: 1\n"
        "properties:\n"
        "  - {name: p, rewrite_rule: annotate_only, lowering_strategy: recompute_in_kernel}\n"
        "patterns:\n"
        "  - name: r\n"
        "    property: p\n"
        "    match: [{id: n, op: 'reduce_.*', name: '(a+)+b', in: [X]}]\n"
        "    rewrite: {action: annotate_only}\n";
    mcir_diag d = mcir_diag_stderr();
    mcir_catalog *cat = mcir_catalog_new();
    ck_assert(mcir_catalog_load_string(cat, yaml, strlen(yaml), "inline.yaml", &d));
    const mcir_pattern_form *f = &mcir_catalog_pattern(cat, 0)->nodes[0].forms[0];
    ck_assert(f->ops[MCIR_OP_REDUCE_SUM] && f->ops[MCIR_OP_REDUCE_MEAN] &&
              f->ops[MCIR_OP_REDUCE_MAX]);
    ck_assert(!f->ops[MCIR_OP_MATMUL] && !f->ops[MCIR_OP_SOFTMAX]);
    /* a catastrophic-backtracking regex on a long name stops at the limit */
    char name[4096];
    memset(name, 'a', sizeof name - 2);
    name[sizeof name - 2] = 'c';
    name[sizeof name - 1] = 0;
    ck_assert(!mcir_pattern_form_name_ok(f, name));
    ck_assert(mcir_pattern_form_name_ok(f, "aaab"));
    mcir_catalog_free(cat);
}
END_TEST

/* Truncated and byte-mutated copies of the built-in catalog: the loader
 * returns, with or without errors, and never crashes (run under ASan). */
START_TEST(test_mutations_never_crash) {
    size_t len = mcir_catalog_default_yaml_size;
    char *buf = malloc(len + 1);
    ck_assert_ptr_nonnull(buf);
    FILE *sink = fopen("/dev/null", "w");
    ck_assert_ptr_nonnull(sink);
    mcir_diag d = mcir_diag_to(sink);
    for (size_t cut = 0; cut < len; cut += 61) {
        mcir_catalog *cat = mcir_catalog_new();
        memcpy(buf, mcir_catalog_default_yaml, cut);
        buf[cut] = 0;
        mcir_catalog_load_string(cat, buf, cut, "cut.yaml", &d);
        mcir_catalog_free(cat);
    }
    uint64_t s = 0x9e3779b97f4a7c15ull;
    static const char junk[] = "[]{}:,-&*!|>'\"%@`#?\t\n 0a";
    for (int iter = 0; iter < 400; iter++) {
        memcpy(buf, mcir_catalog_default_yaml, len);
        for (int k = 0; k < 1 + iter % 4; k++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)(s >> 33) % len;
            buf[at] = junk[(s >> 20) % (sizeof junk - 1)];
        }
        buf[len] = 0;
        mcir_catalog *cat = mcir_catalog_new();
        mcir_catalog_load_string(cat, buf, len, "mutated.yaml", &d);
        mcir_catalog_free(cat);
    }
    fclose(sink);
    free(buf);
}
END_TEST

/* priority: higher runs first, ties keep the order loaded; a replaced rule
 * keeps its place among equals. */
START_TEST(test_priority_orders_rules) {
    mcir_diag d = mcir_diag_stderr();
    mcir_catalog *cat = mcir_catalog_new();
    ck_assert(mcir_catalog_load_default(cat, &d));
    int builtin = mcir_catalog_n_patterns(cat);
    const char *first = mcir_catalog_pattern(cat, 0)->name;
    const char *text =
        "mcir_catalog: 1\n"
        "properties:\n"
        "  - {name: pp, rewrite_rule: annotate_only, lowering_strategy: recompute_in_kernel}\n"
        "patterns:\n"
        "  - name: late\n    property: pp\n    priority: -5\n"
        "    match: [{id: m, op: relu, in: [X]}]\n"
        "    rewrite: {action: annotate_only}\n"
        "  - name: early\n    property: pp\n    priority: 7\n"
        "    match: [{id: m, op: relu, in: [X]}]\n"
        "    rewrite: {action: annotate_only}\n"
        "  - name: plain\n    property: pp\n"
        "    match: [{id: m, op: relu, in: [X]}]\n"
        "    rewrite: {action: annotate_only}\n";
    ck_assert(mcir_catalog_load_string(cat, text, strlen(text), "prio.yaml", &d));
    ck_assert_int_eq(mcir_catalog_n_patterns(cat), builtin + 3);
    ck_assert_str_eq(mcir_catalog_pattern(cat, 0)->name, "early");
    ck_assert_str_eq(mcir_catalog_pattern(cat, 1)->name, first);
    ck_assert_str_eq(mcir_catalog_pattern(cat, builtin + 1)->name, "plain");
    ck_assert_str_eq(mcir_catalog_pattern(cat, builtin + 2)->name, "late");
    mcir_catalog_free(cat);
}
END_TEST

static Suite *catalog_suite(void) {
    Suite *s = suite_create("catalog");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_default_loads);
    tcase_add_test(tc, test_default_is_embedded_copy);
    tcase_add_test(tc, test_bad_corpus);
    tcase_add_test(tc, test_good_files);
    tcase_add_test(tc, test_replace_keeps_position);
    tcase_add_test(tc, test_file_missing);
    tcase_add_test(tc, test_regex_op_set);
    tcase_add_test(tc, test_mutations_never_crash);
    tcase_add_test(tc, test_priority_orders_rules);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return test_main(catalog_suite()); }

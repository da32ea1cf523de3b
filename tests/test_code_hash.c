/* test_code_hash.c - a run key's code hash covers the shared sources and its
 * own policy's files only (harness/exp/code_hash.h): a new policy changes no
 * other policy's key, an edit of a policy's file changes its own key, an
 * edit of a shared file every key; and the registry's .sources follow the
 * includes, so no policy uses a file of another that its key leaves out. */
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/exp/code_hash.h"

enum { H_COMMON, H_RKV_C, H_RKV_H, H_SELECT, H_SNAPKV, H_MINE, H_HELPER };

/* A small tree: four files of policies/ (and, with `more`, a new policy's
 * file and a new shared helper) and two rows (with `more`, a third). */
struct tree {
    const char *hash[H_HELPER + 1];
    struct code_file files[8];
    struct policy_entry rows[3];
    int n_rows;
};

static void tree_init(struct tree *t)
{
    memset(t, 0, sizeof *t);
    static const char *const h[] = {"c0", "a1", "a2", "a3", "a4", "a5", "a6"};
    for (int i = 0; i <= H_HELPER; i++) t->hash[i] = h[i];
    t->rows[0] = (struct policy_entry){.name = "rkv", .sources = "rkv.c rkv.h"};
    t->rows[1] = (struct policy_entry){.name = "snapkv", .sources = "snapkv.c"};
    t->n_rows = 2;
}

/* with_mine: policies/mine.c and its row; with_helper: policies/helper.c,
 * which no row names. */
static void key(struct tree *t, int with_mine, int with_helper, const char *name, char out[65])
{
    int n = 0;
    t->files[n++] = (struct code_file){"policies/rkv.c", t->hash[H_RKV_C]};
    t->files[n++] = (struct code_file){"policies/rkv.h", t->hash[H_RKV_H]};
    t->files[n++] = (struct code_file){"policies/select.c", t->hash[H_SELECT]};
    t->files[n++] = (struct code_file){"policies/snapkv.c", t->hash[H_SNAPKV]};
    if (with_mine) t->files[n++] = (struct code_file){"policies/mine.c", t->hash[H_MINE]};
    if (with_helper) t->files[n++] = (struct code_file){"policies/helper.c", t->hash[H_HELPER]};
    t->files[n] = (struct code_file){NULL, NULL};
    t->rows[2] = (struct policy_entry){.name = "mine", .sources = "mine.c"};
    t->n_rows = with_mine ? 3 : 2;
    const struct policy_entry *en = NULL;
    for (int i = 0; i < t->n_rows; i++)
        if (!strcmp(t->rows[i].name, name)) en = &t->rows[i];
    struct eb_err e = {0};
    out[0] = '\0';
    CHECK_MSG(en && code_hash_combine(t->hash[H_COMMON], t->files, t->rows, t->n_rows, en, out,
                                      &e) == 0, "%s", e.msg);
}

static void test_new_policy_keeps_keys(void)
{
    struct tree t;
    tree_init(&t);
    char rkv[65], snap[65], k[65];
    key(&t, 0, 0, "rkv", rkv);
    key(&t, 0, 0, "snapkv", snap);
    CHECK(strlen(rkv) == 64 && strcmp(rkv, snap) != 0);
    /* a new policy: its file and its row */
    key(&t, 1, 0, "rkv", k);
    CHECK_STR(k, rkv);
    key(&t, 1, 0, "snapkv", k);
    CHECK_STR(k, snap);
    key(&t, 1, 0, "mine", k);
    CHECK(strcmp(k, rkv) != 0 && strcmp(k, snap) != 0);
    /* a new file no row names is a shared helper: every key changes */
    key(&t, 0, 1, "rkv", k);
    CHECK(strcmp(k, rkv) != 0);
    key(&t, 0, 1, "snapkv", k);
    CHECK(strcmp(k, snap) != 0);
}

static void test_edits_change_the_right_keys(void)
{
    struct tree t;
    tree_init(&t);
    char rkv[65], snap[65], k[65];
    key(&t, 0, 0, "rkv", rkv);
    key(&t, 0, 0, "snapkv", snap);
    t.hash[H_RKV_H] = "b2";                  /* the policy's own header */
    key(&t, 0, 0, "rkv", k);
    CHECK(strcmp(k, rkv) != 0);
    key(&t, 0, 0, "snapkv", k);
    CHECK_STR(k, snap);
    tree_init(&t);
    t.hash[H_SELECT] = "b3";                 /* a shared file of policies/ */
    key(&t, 0, 0, "rkv", k);
    CHECK(strcmp(k, rkv) != 0);
    key(&t, 0, 0, "snapkv", k);
    CHECK(strcmp(k, snap) != 0);
    tree_init(&t);
    t.hash[H_COMMON] = "c1";                 /* anything outside policies/ */
    key(&t, 0, 0, "snapkv", k);
    CHECK(strcmp(k, snap) != 0);
    tree_init(&t);                           /* and an unchanged tree, the same keys */
    key(&t, 0, 0, "rkv", k);
    CHECK_STR(k, rkv);
}

static void test_unhashed_source_fails(void)
{
    struct code_file files[] = {{"policies/rkv.c", "a1"}, {NULL, NULL}};
    struct policy_entry row = {.name = "typo", .sources = "rkv.c rvk.h"};
    char k[65] = "x";
    struct eb_err e = {0};
    CHECK(code_hash_combine("c0", files, &row, 1, &row, k, &e) == -1);
    CHECK(k[0] == '\0' && strstr(e.msg, "rvk.h") != NULL);
}

/* This build's registry: every row's sources are hashed files, presets share
 * their policy's hash, and different policies get different ones. */
static void test_registry_rows(void)
{
    int n;
    const struct policy_entry *rows = policy_registry(&n);
    char k[65], rkv[65] = "", code[65] = "", snap[65] = "";
    for (int i = 0; i < n; i++) {
        struct eb_err e = {0};
        CHECK_MSG(rows[i].sources && *rows[i].sources, "%s: no .sources", rows[i].name);
        CHECK_MSG(code_hash_policy(&rows[i], k, &e) == 0, "%s", e.msg);
        if (!strcmp(rows[i].name, "rkv")) strcpy(rkv, k);
        if (!strcmp(rows[i].name, "rkv-code")) strcpy(code, k);
        if (!strcmp(rows[i].name, "snapkv")) strcpy(snap, k);
    }
    CHECK(rkv[0] && !strcmp(rkv, code) && strcmp(rkv, snap) != 0);
}

/* The row that names base, or NULL. */
static const struct policy_entry *owner_of(const char *base)
{
    int n;
    const struct policy_entry *rows = policy_registry(&n);
    for (int i = 0; i < n; i++) {
        const char *s = rows[i].sources;
        size_t len = strlen(base);
        for (const char *p = s ? strstr(s, base) : NULL; p; p = strstr(p + 1, base))
            if ((p == s || p[-1] == ' ') && (p[len] == ' ' || p[len] == '\0')) return &rows[i];
    }
    return NULL;
}

static int row_names(const struct policy_entry *row, const char *base)
{
    size_t len = strlen(base);
    const char *s = row->sources;
    for (const char *p = s ? strstr(s, base) : NULL; p; p = strstr(p + 1, base))
        if ((p == s || p[-1] == ' ') && (p[len] == ' ' || p[len] == '\0')) return 1;
    return 0;
}

/* Every file of policies/ that includes a header some row names: the rows
 * naming that file (none: a shared file, all of them) must name the header,
 * so an edit of it changes every key whose code it is compiled into. */
static void check_includes_of(const char *path, const char *base)
{
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot read %s", path);
    if (!f) return;
    char line[512];
    int n;
    const struct policy_entry *rows = policy_registry(&n);
    while (fgets(line, sizeof line, f)) {
        char inc[128];
        if (sscanf(line, " #include \"%127[^\"]\"", inc) != 1 || strchr(inc, '/')) continue;
        if (!owner_of(inc)) continue;        /* a shared header */
        for (int i = 0; i < n; i++)
            if (row_names(&rows[i], base) || !owner_of(base))
                CHECK_MSG(row_names(&rows[i], inc), "%s includes %s, which row %s does not name",
                          path, inc, rows[i].name);
    }
    fclose(f);
}

/* A row naming a header X.h names its code X.c too, where some row names it. */
static void check_header_code(const char *base)
{
    size_t len = strlen(base);
    if (len < 3 || strcmp(base + len - 2, ".h")) return;
    char code[128];
    snprintf(code, sizeof code, "%.*s.c", (int)(len - 2), base);
    if (!owner_of(code)) return;
    int n;
    const struct policy_entry *rows = policy_registry(&n);
    for (int i = 0; i < n; i++)
        if (row_names(&rows[i], base))
            CHECK_MSG(row_names(&rows[i], code), "row %s names %s but not %s", rows[i].name,
                      base, code);
}

static void test_sources_follow_includes(void)
{
    for (int k = 0; code_hash_files[k].path; k++) {
        const char *base = code_hash_files[k].path + strlen("policies/");
        check_includes_of(code_hash_files[k].path, base);
        check_header_code(base);
    }
}

int main(void)
{
    RUN(test_new_policy_keeps_keys);
    RUN(test_edits_change_the_right_keys);
    RUN(test_unhashed_source_fails);
    RUN(test_registry_rows);
    RUN(test_sources_follow_includes);
    return test_summary("code_hash");
}

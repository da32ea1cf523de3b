/* test_datasets.c - registry, JSONL loader, data directory, checksums, the
 * shipped data (datasets/data) and the configs that use it, synthetic set. */
#include "test.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#include <dirent.h>

#include "datasets/dataset.h"
#include "harness/exp/config.h"

#define GOOD "tests/fixtures/datasets/good"
#define BAD "tests/fixtures/datasets/bad/"

/* ---- registry ----------------------------------------------------------- */

static void test_registry_find(void)
{
    struct eb_err e = {0};
    const char *names[] = {"aime24", "aime25", "math500", "gsm8k", "math_train_1000",
                           "livecodebench", "synthetic"};
    for (int i = 0; i < 7; i++) {
        const struct dataset_spec *s = dataset_find(names[i], &e);
        CHECK(s != NULL);
        if (s) CHECK_STR(s->name, names[i]);
    }
    CHECK(dataset_find("synthetic:10:3", &e) == dataset_find("synthetic", NULL));
    CHECK(dataset_find("gsm8k:10", NULL) == NULL);
    CHECK(dataset_find("aime", &e) == NULL);
    CHECK_MSG(strstr(e.msg, "unknown dataset 'aime'") && strstr(e.msg, "aime24") &&
                  strstr(e.msg, "math_train_1000") && strstr(e.msg, "synthetic"),
              "%s", e.msg);
    CHECK(dataset_find(NULL, &e) == NULL);

    CHECK_STR(dataset_find("gsm8k", NULL)->grader, "gsm8k");
    CHECK_STR(dataset_find("math500", NULL)->grader, "math");
    CHECK_STR(dataset_find("livecodebench", NULL)->grader, "code");
    CHECK_STR(dataset_find("gsm8k", NULL)->file, "gsm8k_test.jsonl");
}

static int is_hex64(const char *s)
{
    if (!s || strlen(s) != 64) return 0;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f'))) return 0;
    return 1;
}

/* Every fetchable entry has an https URL and checksums, and tools/fetch_data.sh
 * carries the same ones (it cannot read the C table). */
static void test_registry_sources_match_fetch_script(void)
{
    FILE *f = fopen("tools/fetch_data.sh", "rb");
    if (!f) SKIP("tools/fetch_data.sh not found (run from the repository root)");
    static char script[1 << 16];
    size_t n = fread(script, 1, sizeof script - 1, f);
    fclose(f);
    script[n] = '\0';
    int count;
    const struct dataset_spec *s = dataset_specs(&count);
    int fetchable = 0;
    for (int i = 0; i < count; i++) {
        if (!s[i].source_url) {
            CHECK(s[i].sha256 == NULL);
            continue;
        }
        fetchable++;
        CHECK(strncmp(s[i].source_url, "https://", 8) == 0);
        CHECK_MSG(is_hex64(s[i].sha256), "%s", s[i].name);
        CHECK_MSG(strstr(script, s[i].source_url) != NULL, "%s url not in fetch_data.sh", s[i].name);
        CHECK_MSG(strstr(script, s[i].sha256) != NULL, "%s sha256 not in fetch_data.sh", s[i].name);
        CHECK_MSG(strstr(script, s[i].file) != NULL, "%s file not in fetch_data.sh", s[i].name);
        if (s[i].source_sha256) {
            CHECK(is_hex64(s[i].source_sha256));
            CHECK_MSG(strstr(script, s[i].source_sha256) != NULL, "%s source sha256", s[i].name);
        }
    }
    CHECK(fetchable == 5);
}

/* ---- data directory ------------------------------------------------------- */

static void test_data_dir_resolution(void)
{
    struct eb_err e;
    char dir[256], path[256];
    const char *saved = getenv("EVICTBENCH_DATA");
    char keep[1024] = "";
    if (saved) snprintf(keep, sizeof keep, "%s", saved);

    unsetenv("EVICTBENCH_DATA");
    CHECK(dataset_default_data_dir(NULL, dir, sizeof dir, &e) == 0);
    CHECK_STR(dir, "datasets/data");
    setenv("EVICTBENCH_DATA", "/env/dir", 1);
    CHECK(dataset_default_data_dir(NULL, dir, sizeof dir, &e) == 0);
    CHECK_STR(dir, "/env/dir");
    CHECK(dataset_default_data_dir("", dir, sizeof dir, &e) == 0);
    CHECK_STR(dir, "/env/dir");
    CHECK(dataset_default_data_dir("/explicit", dir, sizeof dir, &e) == 0);
    CHECK_STR(dir, "/explicit");
    CHECK(dataset_default_data_dir("/explicit", dir, 5, &e) == -1);
    CHECK(dataset_file_path(dataset_find("gsm8k", NULL), "/x/", path, sizeof path, &e) == 0);
    CHECK_STR(path, "/x/gsm8k_test.jsonl");
    CHECK(dataset_file_path(dataset_find("synthetic", NULL), "/x", path, sizeof path, &e) == -1);

    /* the env var is used by dataset_load when no directory is given */
    setenv("EVICTBENCH_DATA", GOOD, 1);
    struct dataset d;
    CHECK(dataset_load("gsm8k", NULL, 0, 0, &d, &e) == 0);
    CHECK(d.n == 5);
    dataset_free(&d);
    CHECK(dataset_available("gsm8k", NULL) == 1);
    CHECK(dataset_available("math500", NULL) == 0);
    CHECK(dataset_available("synthetic:5:1", NULL) == 1);
    CHECK(dataset_available("nope", NULL) == 0);
    setenv("EVICTBENCH_DATA", "/nonexistent/evictbench", 1);
    CHECK(dataset_load("gsm8k", NULL, 0, 0, &d, &e) == -1);
    CHECK_MSG(strstr(e.msg, "/nonexistent/evictbench/gsm8k_test.jsonl: cannot open") != NULL,
              "%s", e.msg);
    CHECK(d.n == 0 && d.items == NULL);

    if (saved) setenv("EVICTBENCH_DATA", keep, 1);
    else unsetenv("EVICTBENCH_DATA");
}

/* ---- loader ------------------------------------------------------------- */

static void test_load_fixture(void)
{
    struct eb_err e;
    struct dataset d;
    CHECK(dataset_load("aime24", GOOD, 0, 0, &d, &e) == 0);
    CHECK(d.n == 3);
    CHECK(d.spec == dataset_find("aime24", NULL));
    if (d.n == 3) {
        CHECK_STR(d.items[0].id, "a-1");
        CHECK_STR(d.items[0].problem, "What is $1+1$?");
        CHECK_STR(d.items[0].answer, "2");
        CHECK_STR(d.items[0].extra_json, "{\"answer_original\":\"002\",\"source_id\":60}");
        CHECK_STR(d.items[1].problem, "What is $2 \\cdot 3$?");
        CHECK_STR(d.items[1].extra_json,
                  "{\"url\":\"https://example.org/p2\",\"tags\":[\"x\",1]}");
        /* `question` stands in for `problem`; numbers become their text */
        CHECK_STR(d.items[2].id, "7");
        CHECK_STR(d.items[2].problem, "H\xc3\xa9llo \xe2\x80\x94 what is 3+4?");
        CHECK_STR(d.items[2].answer, "7");
        CHECK_STR(d.items[2].extra_json, "{}");
    }
    dataset_free(&d);
    CHECK(d.n == 0 && d.items == NULL);
    dataset_free(&d); /* twice is harmless */

    /* gsm8k: `question` only on most rows; the duplicate is not an extra */
    CHECK(dataset_load("gsm8k", GOOD, 0, 0, &d, &e) == 0);
    CHECK(d.n == 5);
    if (d.n == 5) {
        CHECK_STR(d.items[0].problem, "Sam has 3 cats and gets 2 more. How many cats?");
        CHECK_STR(d.items[0].extra_json, "{\"answer_full\":\"3+2=<<3+2=5>>5\\n#### 5\"}");
        CHECK_STR(d.items[1].extra_json, "{}");
    }
    dataset_free(&d);
}

static void test_offset_limit(void)
{
    struct eb_err e;
    struct dataset d;
    CHECK(dataset_load("gsm8k", GOOD, 1, 2, &d, &e) == 0);
    CHECK(d.n == 2);
    if (d.n == 2) { CHECK_STR(d.items[0].id, "g-1"); CHECK_STR(d.items[1].id, "g-2"); }
    dataset_free(&d);
    CHECK(dataset_load("gsm8k", GOOD, 3, 100, &d, &e) == 0);
    CHECK(d.n == 2);
    if (d.n == 2) CHECK_STR(d.items[1].id, "g-4");
    dataset_free(&d);
    CHECK(dataset_load("gsm8k", GOOD, 4, 0, &d, &e) == 0);
    CHECK(d.n == 1);
    dataset_free(&d);
    CHECK(dataset_load("gsm8k", GOOD, 5, 0, &d, &e) == -1);
    CHECK_MSG(strstr(e.msg, "offset 5 is past the last of its 5 rows") != NULL, "%s", e.msg);
    CHECK(dataset_load("gsm8k", GOOD, -1, 0, &d, &e) == -1);
    CHECK(dataset_load("nope", GOOD, 0, 0, &d, &e) == -1);
    CHECK(strstr(e.msg, "unknown dataset 'nope'") != NULL);
}

/* Loads a bad fixture with aime24's mapping; expects exactly `want`. */
static void expect_bad(const char *file, const char *want)
{
    char path[256];
    snprintf(path, sizeof path, BAD "%s", file);
    struct eb_err e = {0};
    struct dataset d = {.n = 99};
    int rc = dataset_load_file(dataset_find("aime24", NULL), path, 0, 0, &d, &e);
    CHECK_MSG(rc == -1, "%s loaded", file);
    CHECK(d.n == 0 && d.items == NULL);
    char full[512];
    snprintf(full, sizeof full, BAD "%s", want);
    CHECK_STR(e.msg, full);
}

static void test_malformed_lines(void)
{
    expect_bad("bad_json.jsonl", "bad_json.jsonl:3: invalid JSON near byte 44");
    expect_bad("missing_answer.jsonl", "missing_answer.jsonl:2: answer field \"answer\" is missing");
    expect_bad("empty_answer.jsonl", "empty_answer.jsonl:1: answer field \"answer\" is empty");
    expect_bad("answer_null.jsonl", "answer_null.jsonl:3: answer field \"answer\" is not a string");
    expect_bad("dup_id.jsonl", "dup_id.jsonl:5: duplicate id \"d-2\" (first on line 2)");
    expect_bad("not_object.jsonl", "not_object.jsonl:2: expected a JSON object");
    expect_bad("trailing.jsonl", "trailing.jsonl:1: text after the JSON object at byte 47");
    expect_bad("dup_key.jsonl", "dup_key.jsonl:1: key \"answer\" appears twice");
    expect_bad("empty.jsonl", "empty.jsonl: no rows");
    expect_bad("bad_utf8.jsonl", "bad_utf8.jsonl:2: invalid UTF-8 at byte 30");
    expect_bad("nul_byte.jsonl", "nul_byte.jsonl:2: line contains a NUL byte");

    struct eb_err e;
    struct dataset d;
    CHECK(dataset_load_file(dataset_find("aime24", NULL), BAD "no_such_file.jsonl", 0, 0, &d,
                            &e) == -1);
    CHECK(strstr(e.msg, "no_such_file.jsonl: cannot open") != NULL);
}

/* The livecodebench mapping reads LiveCodeBench's field names and ours;
 * test cases come back as JSON text either way. */
static void test_livecodebench_fixture(void)
{
    struct eb_err e;
    struct dataset d;
    CHECK(dataset_load("livecodebench", "tests/fixtures/datasets/lcb", 0, 0, &d, &e) == 0);
    CHECK(d.n == 4);
    if (d.n == 4) {
        CHECK_STR(d.items[0].id, "sum2");
        CHECK(strncmp(d.items[0].answer, "[{\"input\": \"3 4\\n\"", 18) == 0);
        CHECK_STR(d.items[0].extra_json, "{\"difficulty\":\"easy\",\"platform\":\"ours\"}");
        CHECK_STR(d.items[1].id, "sortnums");
        CHECK(strncmp(d.items[1].answer, "[{\"input\":\"5\\n3 1 4 1 5\\n\"", 26) == 0);
    }
    dataset_free(&d);
}

/* ---- checksums ---------------------------------------------------------- */

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK_MSG(f != NULL, "%s", path);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void copy_file(const char *from, const char *to)
{
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    CHECK(a && b);
    char buf[4096];
    size_t n;
    while (a && b && (n = fread(buf, 1, sizeof buf, a)) > 0) fwrite(buf, 1, n, b);
    if (a) fclose(a);
    if (b) fclose(b);
}

static void test_checksums(void)
{
    char dir[] = "/tmp/evictbench-sums-XXXXXX", file[128], sums[128];
    if (!mkdtemp(dir)) SKIP("mkdtemp: %s", strerror(errno));
    snprintf(file, sizeof file, "%s/gsm8k_test.jsonl", dir);
    snprintf(sums, sizeof sums, "%s/SHA256SUMS", dir);
    copy_file(GOOD "/gsm8k_test.jsonl", file);
    struct eb_err e;
    struct dataset d;

    /* no SHA256SUMS: the file must be the official one the registry names */
    CHECK(dataset_load("gsm8k", dir, 0, 0, &d, &e) == -1);
    CHECK_MSG(strstr(e.msg, "gsm8k_test.jsonl: sha256 caa6139e695b3aa33e4485b5c754402031bcdccd1d1f68"
                            "5614c401185b9b3e3d, but the dataset registry") != NULL, "%s", e.msg);
    CHECK(strstr(e.msg, dataset_find("gsm8k", NULL)->sha256) != NULL);
    CHECK(d.n == 0 && d.items == NULL);

    /* a SHA256SUMS that lists it (sha256sum's format, text and binary mode) */
    write_text(sums, "bc1a22cbc4059d1b62d14114232fa235815aa691a104e464f4fae8041f305839  aime24.jsonl\n"
                     "caa6139e695b3aa33e4485b5c754402031bcdccd1d1f685614c401185b9b3e3d *gsm8k_test.jsonl\n");
    CHECK_MSG(dataset_load("gsm8k", dir, 0, 0, &d, &e) == 0, "%s", e.msg);
    CHECK(d.n == 5);
    dataset_free(&d);

    /* one changed byte in the file */
    FILE *f = fopen(file, "r+b");
    CHECK(f != NULL);
    if (f) { fseek(f, 10, SEEK_SET); fputc('#', f); fclose(f); }
    CHECK(dataset_load("gsm8k", dir, 0, 0, &d, &e) == -1);
    CHECK_MSG(strstr(e.msg, "/SHA256SUMS says caa6139e") != NULL &&
              strstr(e.msg, "the file was changed") != NULL, "%s", e.msg);

    /* a SHA256SUMS that does not list the file, or is malformed */
    write_text(sums, "bc1a22cbc4059d1b62d14114232fa235815aa691a104e464f4fae8041f305839  aime24.jsonl\n");
    CHECK(dataset_load("gsm8k", dir, 0, 0, &d, &e) == -1);
    CHECK_MSG(strstr(e.msg, "SHA256SUMS does not list gsm8k_test.jsonl") != NULL, "%s", e.msg);
    write_text(sums, "xyz  gsm8k_test.jsonl\n");
    CHECK(dataset_load("gsm8k", dir, 0, 0, &d, &e) == -1);
    CHECK_MSG(strstr(e.msg, "SHA256SUMS:1: expected") != NULL, "%s", e.msg);

    /* dataset_load_file reads any file unchecked */
    CHECK(dataset_load_file(dataset_find("gsm8k", NULL), GOOD "/gsm8k_test.jsonl", 0, 0, &d, &e) == 0);
    dataset_free(&d);
    remove(file);
    remove(sums);
    rmdir(dir);
}

/* ---- the shipped data files (datasets/data) ----------------------------- */

#define SHIPPED "datasets/data"

/* datasets/data/SHA256SUMS lists every registry file with the registry's sum. */
static void test_shipped_checksums(void)
{
    FILE *f = fopen(SHIPPED "/SHA256SUMS", "r");
    CHECK_MSG(f != NULL, "%s/SHA256SUMS missing", SHIPPED);
    if (!f) return;
    char line[512];
    int listed = 0, n;
    const struct dataset_spec *specs = dataset_specs(&n);
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        int known = 0;
        for (int i = 0; i < n; i++) {
            if (!specs[i].file || strcmp(line + 66, specs[i].file)) continue;
            known = 1;
            CHECK_MSG(specs[i].sha256 && strncmp(line, specs[i].sha256, 64) == 0,
                      "%s: SHA256SUMS and the registry differ", specs[i].file);
        }
        CHECK_MSG(known, "SHA256SUMS lists a file the registry does not know: %s", line + 66);
        listed++;
    }
    fclose(f);
    CHECK_MSG(listed == 5, "%d files listed", listed);
    for (int i = 0; i < n; i++)   /* every file with a checksum ships */
        if (specs[i].file && specs[i].sha256) CHECK_MSG(dataset_available(specs[i].name, SHIPPED),
                                                        "%s does not ship", specs[i].name);
}

/* Every config in experiments/ loads its datasets from datasets/data, offline,
 * with as many rows as it asks for, and none is the synthetic test fixture. */
static void test_configs_load_offline(void)
{
    DIR *dir = opendir("experiments");
    CHECK_MSG(dir != NULL, "experiments/: %s", strerror(errno));
    if (!dir) return;
    struct dirent *de;
    int configs = 0;
    while ((de = readdir(dir))) {
        size_t len = strlen(de->d_name);
        if (len < 6 || strcmp(de->d_name + len - 5, ".json")) continue;
        char path[512];
        snprintf(path, sizeof path, "experiments/%s", de->d_name);
        struct exp_config cfg;
        struct eb_err e;
        int rc = exp_config_load(path, &cfg, &e);
        CHECK_MSG(rc == 0, "%s", e.msg);
        if (rc) continue;
        configs++;
        for (int i = 0; i < cfg.n_datasets; i++) {
            const struct exp_dataset *x = &cfg.datasets[i];
            CHECK_MSG(strncmp(x->name, "synthetic", 9) != 0, "%s uses the synthetic fixture", path);
            struct dataset d;
            rc = dataset_load(x->name, SHIPPED, x->offset, x->limit > 0 ? x->limit : 0, &d, &e);
            CHECK_MSG(rc == 0, "%s: %s", path, e.msg);
            if (rc) continue;
            CHECK_MSG(x->limit <= 0 || d.n == x->limit, "%s: %s: %d rows, asks for %d", path,
                      x->name, d.n, x->limit);
            dataset_free(&d);
        }
        exp_config_free(&cfg);
    }
    closedir(dir);
    CHECK_MSG(configs >= 10, "only %d configs found", configs);
}

static const char *shared_dir(void)
{
    const char *env = getenv("EVICTBENCH_DATA");
    if (env && env[0]) return env;
    return SHIPPED;
}

static void test_shared_datasets(void)
{
    const char *dir = shared_dir();
    if (!dir) SKIP("no data directory (set EVICTBENCH_DATA or provide ../shared/datasets)");
    struct { const char *name; int rows; const char *first_id, *first_answer; } want[] = {
        {"aime24", 30, "aime24-2024-I-1", "204"},
        {"aime25", 30, "aime25-2025-I-1", "70"},
        {"math500", 500, "test/precalculus/807.json", "\\left( 3, \\frac{\\pi}{2} \\right)"},
        {"gsm8k", 1319, "gsm8k-test-0000", "18"},
        {"math_train_1000", 1000, "train/algebra/49.json", "-2"},
    };
    int checked = 0;
    for (int i = 0; i < 5; i++) {
        struct eb_err e;
        struct dataset d;
        if (!dataset_available(want[i].name, dir)) {
            fprintf(stderr, "  note: %s not in %s, not checked\n", want[i].name, dir);
            continue;
        }
        checked++;
        int rc = dataset_load(want[i].name, dir, 0, 0, &d, &e);
        CHECK_MSG(rc == 0, "%s", e.msg);
        if (rc) continue;
        CHECK_MSG(d.n == want[i].rows, "%s: %d rows", want[i].name, d.n);
        CHECK(d.spec->rows == want[i].rows);
        CHECK_STR(d.items[0].id, want[i].first_id);
        CHECK_STR(d.items[0].answer, want[i].first_answer);
        for (int k = 0; k < d.n; k++)
            CHECK(d.items[k].problem[0] && d.items[k].answer[0] && d.items[k].extra_json[0] == '{');
        dataset_free(&d);

        /* the checksum in the registry is that of this file */
        char path[1024], cmd[1200], line[256] = "";
        CHECK(dataset_file_path(dataset_find(want[i].name, NULL), dir, path, sizeof path, &e) == 0);
        snprintf(cmd, sizeof cmd, "sha256sum '%s' 2>/dev/null", path);
        FILE *p = popen(cmd, "r");
        if (p) {
            if (!fgets(line, sizeof line, p)) line[0] = '\0';
            pclose(p);
        }
        if (line[0]) CHECK_MSG(strncmp(line, dataset_find(want[i].name, NULL)->sha256, 64) == 0,
                               "%s: sha256 %.64s", want[i].name, line);
    }
    if (!checked) SKIP("none of the dataset files is in %s", dir);
    if (!dataset_available("gsm8k", dir) || !dataset_available("aime24", dir)) return;
    struct eb_err e;
    struct dataset d;
    CHECK(dataset_load("gsm8k", dir, 1300, 50, &d, &e) == 0);
    CHECK(d.n == 19);
    if (d.n == 19) CHECK_STR(d.items[0].id, "gsm8k-test-1300");
    dataset_free(&d);
    CHECK(dataset_load("aime24", dir, 0, 1, &d, &e) == 0);
    if (d.n == 1) CHECK(strstr(d.items[0].extra_json, "\"answer_original\":\"204\"") != NULL);
    dataset_free(&d);
}

/* ---- synthetic ---------------------------------------------------------- */

/* The integer right after the first occurrence of key in s (-1 if none). */
static long num_after(const char *s, const char *key)
{
    const char *p = strstr(s, key);
    if (!p) return -1;
    p += strlen(key);
    if (*p < '0' || *p > '9') return -1;
    return strtol(p, NULL, 10);
}

/* Second integer after key: "buys 3 bags with 7 apples" -> 7 for key "buys ". */
static long second_num_after(const char *s, const char *key)
{
    const char *p = strstr(s, key);
    if (!p) return -1;
    p += strlen(key);
    while (*p >= '0' && *p <= '9') p++;
    while (*p && (*p < '0' || *p > '9')) p++;
    return *p ? strtol(p, NULL, 10) : -1;
}

/* Solves a synthetic problem from its text alone, sentence by sentence
 * (written apart from the generator, so it checks the generator). */
static int solve_text(const char *text, long *answer)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", text);
    long v = 0, total = 0, rate = 0, hours = 0, h_tue = 0;
    int kind = 0; /* 1 inventory, 2 shopping, 3 production */
    for (char *sent = buf; *sent;) {
        char *end = sent;
        while (*end && *end != '.' && *end != '?') end++;
        int last = *end == '\0';
        *end = '\0';
        while (*sent == ' ') sent++;
        if (strstr(sent, " at $")) {
            kind = 2;
            const char *and = strstr(sent, " and ");
            if (!and) return -1;
            total = num_after(sent, "buys ") * num_after(sent, " at $") +
                    num_after(and, " and ") * num_after(and, " at $");
        } else if (strstr(sent, "coupon for $")) total -= num_after(sent, "coupon for $");
        else if (strstr(sent, "pays with a $")) *answer = num_after(sent, "pays with a $") - total;
        else if (strstr(sent, "per hour")) { kind = 3; rate = num_after(sent, "makes "); }
        else if (strstr(sent, "On Monday")) { hours = num_after(sent, "runs for "); h_tue = hours; }
        else if (strstr(sent, "On Tuesday")) {
            long d = num_after(sent, "runs ");
            h_tue = strstr(sent, "longer") ? hours + d : hours - d;
            hours += h_tue;
        } else if (strstr(sent, "twice as long")) hours += 2 * h_tue;
        else if (strstr(sent, " has ") && !strstr(sent, "already")) { kind = 1; v = num_after(sent, " has "); }
        else if (strstr(sent, "buys ")) v += num_after(sent, "buys ") * second_num_after(sent, "buys ");
        else if (strstr(sent, "gives away ")) v -= num_after(sent, "gives away ");
        else if (strstr(sent, "finds ")) v += num_after(sent, "finds ");
        else if (strstr(sent, "as many")) v *= 2;
        else if (strstr(sent, "equal groups")) {
            long k = num_after(sent, " into ");
            if (k <= 0 || v % k) return -1;
            v /= k;
        } else if (strstr(sent, "a day for ")) v -= num_after(sent, "uses ") * num_after(sent, "a day for ");
        else if (strncmp(sent, "How many", 8) != 0) return -1;  /* a sentence we do not know */
        if (last) break;
        sent = end + 1;
    }
    if (kind == 1) *answer = v;
    else if (kind == 3) *answer = rate * hours;
    return kind ? 0 : -1;
}

static void test_synthetic_answers(void)
{
    struct eb_err e;
    struct dataset d;
    CHECK(synthetic_generate(3000, 20240601u, &d, &e) == 0);
    int seen[3] = {0, 0, 0}, steps_seen[5] = {0};
    for (int i = 0; i < d.n; i++) {
        long ans = -999999;
        int rc = solve_text(d.items[i].problem, &ans);
        CHECK_MSG(rc == 0, "cannot read: %s", d.items[i].problem);
        char want[32];
        snprintf(want, sizeof want, "%ld", ans);
        CHECK_MSG(rc != 0 || strcmp(want, d.items[i].answer) == 0, "%s -> %s, generator says %s",
                  d.items[i].problem, want, d.items[i].answer);
        CHECK(ans >= 0);
        CHECK(strstr(d.items[i].problem, " 1 ") == NULL || strstr(d.items[i].problem, " 1 hour "));
        if (strstr(d.items[i].extra_json, "inventory")) seen[0]++;
        if (strstr(d.items[i].extra_json, "shopping")) seen[1]++;
        if (strstr(d.items[i].extra_json, "production")) seen[2]++;
        long steps = num_after(d.items[i].extra_json, "\"steps\":");
        CHECK(steps >= 2 && steps <= 4);
        if (steps >= 2 && steps <= 4) steps_seen[steps]++;
    }
    CHECK(seen[0] > 500 && seen[1] > 500 && seen[2] > 500);
    CHECK(steps_seen[2] && steps_seen[3] && steps_seen[4]);
    dataset_free(&d);

    /* the solver itself on a problem worked by hand */
    long ans = 0;
    CHECK(solve_text("Tom has 12 apples. He buys 3 bags with 7 apples each. Then he gives away "
                     "9 apples. How many apples does Tom have now?", &ans) == 0);
    CHECK(ans == 24);
}

static void test_synthetic_deterministic(void)
{
    struct eb_err e;
    struct dataset a, b, c, s;
    CHECK(dataset_load("synthetic:50:7", NULL, 0, 0, &a, &e) == 0);
    CHECK(dataset_load("synthetic:50:7", "/nonexistent", 0, 0, &b, &e) == 0);
    CHECK(dataset_load("synthetic:50:8", NULL, 0, 0, &c, &e) == 0);
    CHECK(dataset_load("synthetic:50:7", NULL, 10, 5, &s, &e) == 0);
    CHECK(a.n == 50 && b.n == 50 && c.n == 50 && s.n == 5);
    int differ = 0;
    for (int i = 0; i < 50 && a.n == 50 && b.n == 50 && c.n == 50; i++) {
        CHECK_STR(a.items[i].id, b.items[i].id);
        CHECK_STR(a.items[i].problem, b.items[i].problem);
        CHECK_STR(a.items[i].answer, b.items[i].answer);
        CHECK_STR(a.items[i].extra_json, b.items[i].extra_json);
        differ += strcmp(a.items[i].problem, c.items[i].problem) != 0;
    }
    CHECK(differ > 40);
    for (int i = 0; i < s.n && a.n == 50; i++) CHECK_STR(s.items[i].problem, a.items[10 + i].problem);
    if (a.n == 50) {
        CHECK_STR(a.items[3].id, "synthetic-7-3");
        /* pinned bytes: a change to the generator changes every stored result */
        CHECK_STR(a.items[3].problem,
                  "A machine makes 11 bolts per hour. On Monday it runs for 8 hours. On Tuesday it "
                  "runs 1 hour less than on Monday. How many bolts does it make on these days in "
                  "total?");
        CHECK_STR(a.items[3].answer, "165");
    }
    dataset_free(&a); dataset_free(&b); dataset_free(&c); dataset_free(&s);

    /* a smaller set is a prefix of a larger one */
    CHECK(dataset_load("synthetic:5:7", NULL, 0, 0, &s, &e) == 0);
    CHECK(dataset_load("synthetic:50:7", NULL, 0, 0, &a, &e) == 0);
    for (int i = 0; i < 5 && s.n == 5; i++) CHECK_STR(s.items[i].problem, a.items[i].problem);
    dataset_free(&a); dataset_free(&s);

    CHECK(dataset_load("synthetic", NULL, 0, 0, &a, &e) == 0);
    CHECK(a.n == SYNTHETIC_DEFAULT_N);
    if (a.n > 0) CHECK_STR(a.items[0].id, "synthetic-1-0");
    CHECK(a.spec == dataset_find("synthetic", NULL));
    dataset_free(&a);
}

static void test_synthetic_names(void)
{
    struct eb_err e;
    int n;
    uint32_t seed;
    CHECK(synthetic_parse_name("synthetic", &n, &seed, &e) == 0);
    CHECK(n == SYNTHETIC_DEFAULT_N && seed == SYNTHETIC_DEFAULT_SEED);
    CHECK(synthetic_parse_name("synthetic:20", &n, &seed, &e) == 0);
    CHECK(n == 20 && seed == SYNTHETIC_DEFAULT_SEED);
    CHECK(synthetic_parse_name("synthetic:20:4294967295", &n, &seed, &e) == 0);
    CHECK(n == 20 && seed == 4294967295u);
    const char *bad[] = {"synthetic:", "synthetic:0", "synthetic:-3", "synthetic:x",
                         "synthetic:10:", "synthetic:10:4294967296", "synthetic:10:1:2",
                         "synthetic:99999999999999999999", "synthetic:1000001", "synthetics",
                         "synthetic:10:-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e.msg[0] = '\0';
        CHECK_MSG(synthetic_parse_name(bad[i], &n, &seed, &e) == -1, "%s accepted", bad[i]);
        CHECK(e.msg[0] != '\0');
    }
    struct dataset d;
    CHECK(dataset_load("synthetic:10:1:2", NULL, 0, 0, &d, &e) == -1);
    CHECK(dataset_load("synthetic:10", NULL, 10, 0, &d, &e) == -1);
    CHECK(strstr(e.msg, "offset 10 is past") != NULL);
    CHECK(synthetic_generate(0, 1, &d, &e) == -1);
}

int main(void)
{
    RUN(test_registry_find);
    RUN(test_registry_sources_match_fetch_script);
    RUN(test_data_dir_resolution);
    RUN(test_load_fixture);
    RUN(test_offset_limit);
    RUN(test_malformed_lines);
    RUN(test_livecodebench_fixture);
    RUN(test_checksums);
    RUN(test_shipped_checksums);
    RUN(test_configs_load_offline);
    RUN(test_shared_datasets);
    RUN(test_synthetic_answers);
    RUN(test_synthetic_deterministic);
    RUN(test_synthetic_names);
    return test_summary("datasets");
}

/* registry.c - the datasets evictbench knows: file, field mapping, grading
 * rule and the official source `make data` fetches.
 *
 * source_sha256 is the checksum of the upstream file as downloaded;
 * sha256 is the checksum of our normalised JSONL (tools/fetch_data.sh
 * rebuilds it from the upstream file and checks both).  Keep the URLs and
 * checksums here in sync with tools/fetch_data.sh; tests/test_datasets.c
 * checks that they agree. */
#include "dataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RAW "https://raw.githubusercontent.com/"

static const struct dataset_spec specs[] = {
    {
        .name = "aime24", .file = "aime24.jsonl",
        .problem_keys = {"problem", "question"}, .answer_keys = {"answer"},
        .id_keys = {"id"}, .grader = "math", .rows = 30,
        .source_url = RAW "Zefan-Cai/R-KV/d15c9767e67c2bd9807128fecc35223fa2484a69/data/aime24.jsonl",
        .source_sha256 = "af2b8bd2aa911b6333ad0df32f3ca05c7ae8ed10f1731f4372c8ae26990bf7ac",
        .sha256 = "ae00cbec51adbd4d9def03410c729c875a07f5850e14909ccd864425278e3d4b",
        .about = "AIME 2024 I and II (30 problems, integer answers)",
    },
    {
        .name = "aime25", .file = "aime25.jsonl",
        .problem_keys = {"problem", "question"}, .answer_keys = {"answer"},
        .id_keys = {"id"}, .grader = "math", .rows = 30,
        .source_url = RAW "armenjeddi/mcd/76771f969048ebd77a1b4261b0a3469192c6f92a/evaluation/data/aime25/test.jsonl",
        .source_sha256 = "19a9f25a12e89abaeea9f7e214f8b6f6eae43285e9d8df7a3818ca0408df4b07",
        .sha256 = "212aa7fef901ed0da7a31359ffd2c7eeaa04a95aeb57db346b0813ba5fa074cb",
        .about = "AIME 2025 I and II (30 problems, integer answers)",
    },
    {
        .name = "math500", .file = "math500.jsonl",
        .problem_keys = {"problem", "question"}, .answer_keys = {"answer"},
        .id_keys = {"id", "unique_id"}, .grader = "math", .rows = 500,
        .source_url = RAW "Zefan-Cai/R-KV/d15c9767e67c2bd9807128fecc35223fa2484a69/data/math.jsonl",
        .source_sha256 = "35dc41080a3680858b27fa7e0533d2d547825316fc5dafe5d316f4ccc5a06132",
        .sha256 = "680cfd5f6d38b444f5ae6662c0da445210a362f6826b5a2d27df98c92ab42b67",
        .about = "MATH-500 test split (LaTeX answers)",
    },
    {
        .name = "gsm8k", .file = "gsm8k_test.jsonl",
        .problem_keys = {"problem", "question"}, .answer_keys = {"answer"},
        .id_keys = {"id"}, .grader = "gsm8k", .rows = 1319,
        .source_url = RAW "openai/grade-school-math/3101c7d5072418e28b9008a6636bde82a006892c/grade_school_math/data/test.jsonl",
        .source_sha256 = "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14",
        .sha256 = "5a9e7e6e09cc1a16d32a9f375100e7ed86357e1ae84bd6a8cfacf1725b08f0f1",
        .about = "GSM8K test split (numeric answers)",
    },
    {
        /* 1000 per-problem files under this directory, named in
         * tools/math_train_1000.ids; there is no single upstream file. */
        .name = "math_train_1000", .file = "math_train_1000.jsonl",
        .problem_keys = {"problem", "question"}, .answer_keys = {"answer"},
        .id_keys = {"id"}, .grader = "math", .rows = 1000,
        .source_url = RAW "aiwaves-cn/agents/e8c4e3c2d19739d3dff59e577d1c97090cc15f59/src/agents/datasets/data/math/train/",
        .source_sha256 = NULL,
        .sha256 = "772e7fe2d87453d92f299d90b9587980c13bafa469b3d899dc266c7e1e6df6aa",
        .about = "1000 MATH training problems, stratified by subject",
    },
    {
        /* Not shipped and not fetched: place a livecodebench.jsonl with
         * `question_content` (or `problem`), `question_id` (or `id`) and
         * `public_test_cases` (or `tests`), a JSON list of
         * {"input": ..., "output": ...} given as a string or inline. */
        .name = "livecodebench", .file = "livecodebench.jsonl",
        .problem_keys = {"problem", "question_content"},
        .answer_keys = {"tests", "public_test_cases"},
        .id_keys = {"id", "question_id"}, .grader = "code", .rows = 0,
        .source_url = NULL, .source_sha256 = NULL, .sha256 = NULL,
        .about = "LiveCodeBench code generation (stdin/stdout tests; data not shipped)",
    },
    {
        .name = "synthetic", .file = NULL,
        .problem_keys = {"problem"}, .answer_keys = {"answer"}, .id_keys = {"id"},
        .grader = "gsm8k", .rows = 0,
        .source_url = NULL, .source_sha256 = NULL, .sha256 = NULL,
        .about = "unit-test fixture: generated arithmetic word problems (synthetic:N:SEED)",
    },
};

const struct dataset_spec *dataset_specs(int *n)
{
    if (n) *n = (int)(sizeof specs / sizeof specs[0]);
    return specs;
}

const struct dataset_spec *dataset_find(const char *name, struct eb_err *e)
{
    int n = (int)(sizeof specs / sizeof specs[0]);
    if (name) {
        /* "synthetic:N:SEED" names the synthetic set */
        size_t len = strcspn(name, ":");
        for (int i = 0; i < n; i++) {
            if (name[len] == ':' && specs[i].file) continue;
            if (strlen(specs[i].name) == len && strncmp(specs[i].name, name, len) == 0)
                return &specs[i];
        }
    }
    if (e) {
        char known[256] = "";
        for (int i = 0; i < n; i++) {
            if (i) strncat(known, ", ", sizeof known - strlen(known) - 1);
            strncat(known, specs[i].name, sizeof known - strlen(known) - 1);
        }
        eb_fail(e, "unknown dataset '%s' (known: %s)", name ? name : "(null)", known);
    }
    return NULL;
}

int dataset_default_data_dir(const char *explicit_dir, char *out, size_t cap,
                             struct eb_err *e)
{
    const char *dir = "datasets/data";
    const char *env = getenv("EVICTBENCH_DATA");
    if (explicit_dir && explicit_dir[0]) dir = explicit_dir;
    else if (env && env[0]) dir = env;
    if (strlen(dir) + 1 > cap) return eb_fail(e, "%s: data directory path too long", dir);
    memcpy(out, dir, strlen(dir) + 1);
    return 0;
}

int dataset_file_path(const struct dataset_spec *spec, const char *data_dir, char *out,
                      size_t cap, struct eb_err *e)
{
    char dir[4096];
    if (!spec->file) return eb_fail(e, "%s: dataset is generated, it has no file", spec->name);
    if (dataset_default_data_dir(data_dir, dir, sizeof dir, e)) return -1;
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/') dir[--dl] = '\0';
    int len = snprintf(out, cap, "%s/%s", dir, spec->file);
    if (len < 0 || (size_t)len >= cap) return eb_fail(e, "%s: data file path too long", dir);
    return 0;
}

int dataset_available(const char *name, const char *data_dir)
{
    const struct dataset_spec *spec = dataset_find(name, NULL);
    char path[4096];
    if (!spec) return 0;
    if (!spec->file) return 1;
    if (dataset_file_path(spec, data_dir, path, sizeof path, NULL)) return 0;
    return access(path, R_OK) == 0;
}

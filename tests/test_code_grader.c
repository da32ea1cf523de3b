/* test_code_grader.c - the LiveCodeBench grader on problems and solutions we
 * wrote ourselves (tests/fixtures/datasets/lcb and code/): verdicts for
 * correct, wrong, crashing, looping, sleeping, memory-hungry, chatty and
 * forking programs, and no processes left behind. */
#include "test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness/grade/code_grader.h"
#include "datasets/dataset.h"

#define CODE "tests/fixtures/datasets/code/"

static struct dataset problems;

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) { free(s); s = NULL; }
    if (s) s[n] = '\0';
    fclose(f);
    return s;
}

static const char *tests_of(const char *id)
{
    for (int i = 0; i < problems.n; i++)
        if (strcmp(problems.items[i].id, id) == 0) return problems.items[i].answer;
    return NULL;
}

static int have_python(void)
{
    return system("python3 -c 'pass' >/dev/null 2>&1") == 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Limits small enough to keep the suite fast. */
static struct code_limits quick(void)
{
    struct code_limits l;
    code_limits_default(&l);
    l.cpu_s = 1;
    l.wall_s = 3;
    l.mem_bytes = (size_t)256 << 20;
    l.max_output = (size_t)1 << 20;
    return l;
}

/* Grades fixture `file` against problem `id`; checks verdict and counts. */
static void expect_wall(const char *file, const char *id, enum code_verdict v, int n_passed,
                        double wall_s, double max_s, struct code_result *out)
{
    char path[256];
    snprintf(path, sizeof path, CODE "%s", file);
    char *text = read_text(path);
    CHECK_MSG(text != NULL, "missing %s", path);
    const char *tests = tests_of(id);
    CHECK_MSG(tests != NULL, "no problem %s", id);
    if (!text || !tests) { free(text); return; }
    struct code_limits l = quick();
    if (wall_s > 0) l.wall_s = wall_s;
    struct code_result r;
    struct eb_err e = {0};
    double t0 = now_s();
    int rc = code_grade(text, tests, &l, &r, &e);
    double took = now_s() - t0;
    free(text);
    CHECK_MSG(rc == 0, "%s: %s", file, e.msg);
    CHECK_MSG(r.verdict == v, "%s: verdict %s, expected %s (%s)", file,
              code_verdict_name(r.verdict), code_verdict_name(v), r.detail);
    CHECK_MSG(r.n_passed == n_passed, "%s: %d passed", file, r.n_passed);
    CHECK(r.passed == (v == CODE_PASS));
    CHECK(r.failed_test == (v == CODE_PASS ? -1 : n_passed));
    CHECK_MSG(took < max_s, "%s took %.2f s", file, took);
    if (out) *out = r;
}

static void expect(const char *file, const char *id, enum code_verdict v, int n_passed,
                   double max_s, struct code_result *out)
{
    expect_wall(file, id, v, n_passed, 0, max_s, out);
}

/* No child of ours is left, running or zombie. */
static void check_no_children(void)
{
    errno = 0;
    CHECK(waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD);
}

static void test_extract(void)
{
    struct eb_err e;
    char *c = NULL;
    CHECK(code_extract_last_block("no code here", &c, &e) == 0 && c == NULL);
    CHECK(code_extract_last_block("```python\nprint(1)\n```", &c, &e) == 0);
    CHECK_STR(c, "print(1)\n");
    free(c);
    CHECK(code_extract_last_block("a\n```\nx=1\n```\nb\n```py\nx=2\n```\n```text\n3\n```\n", &c, &e) == 0);
    CHECK_STR(c, "x=2\n");
    free(c);
    /* the closing fence is required; an unclosed last block is truncation */
    CHECK(code_extract_last_block("```python\nx=1\n```\n```python\nx=2\n", &c, &e) == 0);
    CHECK_STR(c, "x=1\n");
    free(c);
    CHECK(code_extract_last_block("```python\nprint(2)", &c, &e) == 0 && c == NULL);
    /* indented fences, CRLF, a fence with trailing spaces, other languages skipped */
    CHECK(code_extract_last_block("  ```Python\r\ny = 3\r\n  ```  \r\n```cpp\nint x;\n```", &c, &e) == 0);
    CHECK_STR(c, "y = 3\r\n");
    free(c);
    CHECK(code_extract_last_block("```python\n```", &c, &e) == 0);
    CHECK_STR(c, "");
    free(c);
    CHECK(code_extract_last_block("", &c, &e) == 0 && c == NULL);
}

static void test_outputs_match(void)
{
    const char *got = "1 2 3  \r\n4\n\n\n";
    CHECK(code_outputs_match(got, strlen(got), "1 2 3\n4"));
    CHECK(code_outputs_match("\n  7\n", 5, "7"));
    CHECK(code_outputs_match("", 0, "\n"));
    CHECK(!code_outputs_match("7", 1, "8"));
    CHECK(!code_outputs_match("1\n\n2", 4, "1\n2"));
    CHECK(!code_outputs_match("1 2", 3, "1  2"));
    CHECK(!code_outputs_match("1\n2", 3, "1"));
    CHECK(!code_outputs_match("7\0", 2, "7"));
}

static void test_verdicts(void)
{
    if (!have_python()) SKIP("python3 not available");
    if (problems.n == 0) SKIP("fixture problems not loaded");
    struct code_result r;
    expect("sum2.correct.md", "sum2", CODE_PASS, 3, 5, &r);
    expect("sum2.wrong.md", "sum2", CODE_WRONG_ANSWER, 0, 5, &r);
    CHECK_MSG(strstr(r.detail, "expected \"7\\n\", got \"-1\\n\"") != NULL, "%s", r.detail);
    /* the forker writes a file named by its input ("3 4"): it lands in the
     * grader's private directory, which is removed, not in ours */
    expect("sum2.forker.md", "sum2", CODE_WRONG_ANSWER, 0, 5, NULL);
    CHECK(access("3 4", F_OK) != 0);
    expect("sum2.crash.md", "sum2", CODE_RUNTIME_ERROR, 0, 5, &r);
    CHECK_MSG(strstr(r.detail, "ZeroDivisionError") != NULL, "%s", r.detail);
    expect("sum2.segv.md", "sum2", CODE_RUNTIME_ERROR, 0, 5, &r);
    CHECK_MSG(strstr(r.detail, "signal 11") != NULL, "%s", r.detail);
    expect("sum2.nocode.md", "sum2", CODE_NO_CODE, 0, 1, NULL);
    expect("sortnums.correct.md", "sortnums", CODE_PASS, 2, 5, NULL);
    expect("fib.correct.md", "fib", CODE_PASS, 2, 5, NULL);
    expect("lines.correct.md", "lines", CODE_PASS, 1, 5, NULL);
    expect("lines.wrong.md", "lines", CODE_WRONG_ANSWER, 0, 5, NULL);
    check_no_children();
}

static void test_limits(void)
{
    if (!have_python()) SKIP("python3 not available");
    if (problems.n == 0) SKIP("fixture problems not loaded");
    struct code_result r;
    /* CPU: a busy loop dies of SIGXCPU after 1 s of CPU (a generous wall
     * limit so that a loaded machine still shows the CPU limit) */
    expect_wall("sum2.infinite.md", "sum2", CODE_TIME_LIMIT, 0, 15, 12, &r);
    CHECK_MSG(strstr(r.detail, "CPU") != NULL, "%s", r.detail);
    /* wall clock: sleeping uses no CPU, the 3 s deadline kills it */
    expect("sum2.sleep.md", "sum2", CODE_TIME_LIMIT, 0, 4.5, &r);
    CHECK_MSG(strstr(r.detail, "wall-clock") != NULL, "%s", r.detail);
    /* the second test case is exponential: one passed, then the limit */
    expect_wall("fib.slow.md", "fib", CODE_TIME_LIMIT, 1, 15, 12, &r);
    CHECK_MSG(strstr(r.detail, "test 1: CPU") != NULL, "%s", r.detail);
    expect("sum2.memhog.md", "sum2", CODE_MEMORY_LIMIT, 0, 4, &r);
    expect("sum2.noisy.md", "sum2", CODE_OUTPUT_LIMIT, 0, 4, NULL);
    check_no_children();
}

/* A program that forks a sleeper: grading ends when the program does, and
 * the sleeper is killed with its process group. */
static void test_forked_children_killed(void)
{
    if (!have_python()) SKIP("python3 not available");
    char pidfile[] = "/tmp/evictbench-test-pid-XXXXXX";
    int fd = mkstemp(pidfile);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    char tests[512];
    snprintf(tests, sizeof tests, "[{\"input\": \"%s\\n\", \"output\": \"done\"}]", pidfile);
    char *text = read_text(CODE "sum2.forker.md");
    CHECK(text != NULL);
    struct code_limits l = quick();
    l.wall_s = 20;
    struct code_result r;
    struct eb_err e;
    double t0 = now_s();
    CHECK(text && code_grade(text, tests, &l, &r, &e) == 0);
    CHECK_MSG(r.verdict == CODE_PASS, "%s %s", code_verdict_name(r.verdict), r.detail);
    CHECK_MSG(now_s() - t0 < 5, "took %.1f s", now_s() - t0);
    free(text);
    char *pid_text = read_text(pidfile);
    unlink(pidfile);
    int pid = pid_text ? atoi(pid_text) : 0;
    free(pid_text);
    CHECK(pid > 0);
    if (pid > 0) {
        /* gone, or a zombie waiting for init: either way not running */
        char stat_path[64], state = 'X';
        snprintf(stat_path, sizeof stat_path, "/proc/%d/stat", pid);
        for (int tries = 0; tries < 50; tries++) {
            char *st = read_text(stat_path);
            state = 'X';
            if (st) {
                char *p = strrchr(st, ')');
                if (p && p[1] == ' ') state = p[2];
                free(st);
            }
            if (state == 'X' || state == 'Z') break;
            usleep(20000);
        }
        CHECK_MSG(state == 'X' || state == 'Z', "sleeper %d still in state %c", pid, state);
    }
    check_no_children();
}

/* Input and output far larger than a pipe buffer. */
static void test_large_io(void)
{
    if (!have_python()) SKIP("python3 not available");
    int n = 100000;
    size_t cap = (size_t)n * 32 + 256;
    char *in = malloc(cap), *out = malloc(cap), *tests = malloc(2 * cap);
    CHECK(in && out && tests);
    if (!in || !out || !tests) { free(in); free(out); free(tests); return; }
    size_t il = (size_t)sprintf(in, "%d\\n", n), ol = 0;
    for (int i = 0; i < n; i++) {
        il += (size_t)sprintf(in + il, "%d\\n", i);
        ol += (size_t)sprintf(out + ol, "%d\\n", 2 * i);
    }
    snprintf(tests, 2 * cap, "[{\"input\": \"%s\", \"output\": \"%s\"}]", in, out);
    const char *prog = "```python\nimport sys\nd = sys.stdin.read().split()\n"
                       "sys.stdout.write(''.join('%d\\n' % (2 * int(x)) for x in d[1:]))\n```\n";
    struct code_limits l = quick();
    l.max_output = (size_t)4 << 20;
    struct code_result r;
    struct eb_err e;
    CHECK(code_grade(prog, tests, &l, &r, &e) == 0);
    CHECK_MSG(r.verdict == CODE_PASS, "%s %s", code_verdict_name(r.verdict), r.detail);
    free(in); free(out); free(tests);
    check_no_children();
}

/* With a network namespace the loopback interface is down: a server
 * listening here cannot be reached from the program. */
static void test_no_network(void)
{
    if (!have_python()) SKIP("python3 not available");
    int s = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(s >= 0);
    if (s < 0) return;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 4) != 0 ||
        getsockname(s, (struct sockaddr *)&a, &al) != 0) {
        close(s);
        SKIP("cannot listen on 127.0.0.1");
    }
    char tests[128];
    snprintf(tests, sizeof tests, "[{\"input\": \"%d\\n\", \"output\": \"blocked\"}]",
             ntohs(a.sin_port));
    const char *prog = "```python\nimport socket\nport = int(input())\ntry:\n"
                       "    socket.create_connection(('127.0.0.1', port), timeout=1)\n"
                       "    print('connected')\nexcept OSError:\n    print('blocked')\n```\n";
    struct code_limits l = quick();
    struct code_result r;
    struct eb_err e;
    CHECK(code_grade(prog, tests, &l, &r, &e) == 0);
    close(s);
    check_no_children();
    if (!r.net_isolated) SKIP("kernel refused a network namespace; programs run with the host network");
    CHECK_MSG(r.verdict == CODE_PASS, "%s %s", code_verdict_name(r.verdict), r.detail);
}

static void test_bad_inputs(void)
{
    struct code_limits l = quick();
    struct code_result r;
    struct eb_err e;
    const char *prog = "```python\nprint(1)\n```";
    CHECK(code_grade(prog, "not json", &l, &r, &e) == -1);
    CHECK(strstr(e.msg, "not valid JSON") != NULL);
    CHECK(code_grade(prog, "[]", &l, &r, &e) == -1);
    CHECK(code_grade(prog, "{}", &l, &r, &e) == -1);
    CHECK(code_grade(prog, "[{\"input\": \"1\"}]", &l, &r, &e) == -1);
    CHECK(strstr(e.msg, "case 0") != NULL);
    CHECK(code_grade(prog, "[{\"input\": \"1\", \"output\": \"1\"}, {\"input\": 2, \"output\": \"1\"}]",
                     &l, &r, &e) == -1);
    CHECK(strstr(e.msg, "case 1") != NULL);
    CHECK(code_grade(prog, NULL, &l, &r, &e) == -1);
    l.python = "/nonexistent/python3";
    CHECK(code_grade(prog, "[{\"input\": \"\", \"output\": \"1\"}]", &l, &r, &e) == -1);
    CHECK(strstr(e.msg, "/nonexistent/python3") != NULL);
    l = quick();
    l.wall_s = 0;
    CHECK(code_grade(prog, "[{\"input\": \"\", \"output\": \"1\"}]", &l, &r, &e) == -1);
    /* a NULL limits pointer means the defaults */
    if (have_python()) {
        CHECK(code_grade(prog, "[{\"input\": \"\", \"output\": \"1\"}]", NULL, &r, &e) == 0);
        CHECK(r.passed == 1 && r.n_tests == 1);
    }
    CHECK_STR(code_verdict_name(CODE_MEMORY_LIMIT), "memory_limit");
    check_no_children();
}

int main(void)
{
    struct eb_err e;
    if (dataset_load("livecodebench", "tests/fixtures/datasets/lcb", 0, 0, &problems, &e))
        fprintf(stderr, "  cannot load fixture problems: %s\n", e.msg);
    RUN(test_extract);
    RUN(test_outputs_match);
    RUN(test_verdicts);
    RUN(test_limits);
    RUN(test_forked_children_killed);
    RUN(test_large_io);
    RUN(test_no_network);
    RUN(test_bad_inputs);
    dataset_free(&problems);
    return test_summary("code_grader");
}

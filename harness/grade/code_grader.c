/* code_grader.c - run a model's Python program against test cases.
 * See code_grader.h for the rules; the why of the process handling:
 *
 * - stdin and stderr are unlinked temporary files, not pipes, so a large
 *   input or a chatty stderr can never deadlock parent and child;
 * - the child leads its own process group, so a program that forks is
 *   killed whole (kill(-pgid)) when it times out or finishes;
 * - the parent notices the exit with waitid(WNOWAIT) and kills the group
 *   while the leader is still a zombie, so the group id cannot have been
 *   reused; then it reaps;
 * - between fork and exec the child only makes async-signal-safe calls and
 *   reports how far it got through a close-on-exec status pipe. */
#include "harness/grade/code_grader.h"
#include "util/clock.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

void code_limits_default(struct code_limits *l)
{
    l->cpu_s = 6.0;
    l->wall_s = 10.0;
    l->mem_bytes = (size_t)1 << 30;
    l->max_output = (size_t)16 << 20;
    l->python = NULL;
}

const char *code_verdict_name(enum code_verdict v)
{
    switch (v) {
    case CODE_PASS: return "pass";
    case CODE_NO_CODE: return "no_code";
    case CODE_WRONG_ANSWER: return "wrong_answer";
    case CODE_RUNTIME_ERROR: return "runtime_error";
    case CODE_TIME_LIMIT: return "time_limit";
    case CODE_MEMORY_LIMIT: return "memory_limit";
    case CODE_OUTPUT_LIMIT: return "output_limit";
    }
    return "unknown";
}

static int all_ws(const char *s)
{
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\r' && *s != '\n') return 0;
    return 1;
}

/* ---- running one case --------------------------------------------------- */

/* An unlinked temporary file holding `data` (or empty), positioned at 0. */
static int temp_fd(const char *dir, const char *data, size_t n, struct eb_err *e)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/evictbench-io-XXXXXX", dir);
    int fd = mkostemp(path, O_CLOEXEC);
    if (fd < 0) return eb_fail(e, "%s: cannot create a temporary file: %s", dir, strerror(errno));
    unlink(path);
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, data + off, n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int err = errno;
            close(fd);
            return eb_fail(e, "%s: cannot write a temporary file: %s", dir, strerror(err));
        }
        off += (size_t)w;
    }
    if (lseek(fd, 0, SEEK_SET) < 0) {
        close(fd);
        return eb_fail(e, "%s: cannot rewind a temporary file", dir);
    }
    return fd;
}

struct run {
    const char *python, *script, *workdir;
    char **envp;
    const struct code_limits *lim;
    int max_fd;
};

struct outcome {
    int status;          /* from wait4 */
    int wall_timeout, output_limit, net_isolated;
    double cpu_s;
    char *out;           /* stdout, NUL-terminated */
    size_t out_len;
    char err_tail[512];  /* the end of stderr */
};

/* Child side: never returns. */
static void child_exec(const struct run *r, int in_fd, int out_fd, int err_fd, int status_fd)
{
    char st = 'H';
    setpgid(0, 0);
    if (unshare(CLONE_NEWNET) == 0 || unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0) st = 'N';
    if (write(status_fd, &st, 1) < 0) _exit(126);

    if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0 ||
        dup2(status_fd, 3) < 0 || fcntl(3, F_SETFD, FD_CLOEXEC) < 0)
        _exit(126);
    if (close_range(4, ~0U, 0) != 0)
        for (int fd = 4; fd < r->max_fd; fd++) close(fd);
    if (chdir(r->workdir) != 0) _exit(126);

    struct rlimit rl;
    rlim_t cpu = (rlim_t)(r->lim->cpu_s + 0.999);
    if (cpu < 1) cpu = 1;
    rl.rlim_cur = cpu; rl.rlim_max = cpu + 1;
    setrlimit(RLIMIT_CPU, &rl);
    rl.rlim_cur = rl.rlim_max = (rlim_t)r->lim->mem_bytes;
    setrlimit(RLIMIT_AS, &rl);
    rl.rlim_cur = rl.rlim_max = (rlim_t)r->lim->max_output;
    setrlimit(RLIMIT_FSIZE, &rl);
    rl.rlim_cur = rl.rlim_max = 0;
    setrlimit(RLIMIT_CORE, &rl);

    char *argv[] = {(char *)r->python, "-I", (char *)r->script, NULL};
    execve(r->python, argv, r->envp);
    int err = errno;
    char msg[1 + sizeof err];
    msg[0] = 'E';
    memcpy(msg + 1, &err, sizeof err);
    if (write(3, msg, sizeof msg) < 0) _exit(127);
    _exit(127);
}

static void kill_group_and_reap(pid_t pid, int *status, double *cpu)
{
    struct rusage ru;
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    memset(&ru, 0, sizeof ru);
    while (wait4(pid, status, 0, &ru) < 0 && errno == EINTR) {}
    *cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* The status pipe carries the network byte ('N' or 'H'), then closes at
 * exec, or carries 'E' + errno when exec failed.  Returns the bytes read. */
static size_t read_status(int fd, char *st, size_t cap)
{
    size_t got = 0;
    for (;;) {
        ssize_t n = read(fd, st + got, cap - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
        if (got == cap) break;
    }
    return got;
}

/* Read the child's stdout into o->out (capacity *cap) until it has exited
 * and the pipe is drained, the deadline passes or the output limit is hit. */
static void collect_output(const struct run *r, pid_t pid, int out_fd, double deadline,
                           struct outcome *o, size_t *cap)
{
    int eof = 0, exited = 0;
    for (;;) {
        if (!exited) {
            siginfo_t si;
            memset(&si, 0, sizeof si);
            if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid)
                exited = 1;
        }
        if (exited && eof) break;
        double left = deadline - clock_now_s();
        if (left <= 0) { o->wall_timeout = !exited; break; }
        if (exited) {
            /* kill leftovers of the group so they release the pipe */
            kill(-pid, SIGKILL);
        }
        int wait_ms = left < 0.02 ? (int)(left * 1000) + 1 : 20;
        if (eof) {
            struct timespec ts = {0, (long)wait_ms * 1000000L};
            nanosleep(&ts, NULL);
            continue;
        }
        struct pollfd pfd = {.fd = out_fd, .events = POLLIN};
        int pr = poll(&pfd, 1, wait_ms);
        if (pr <= 0) continue;
        if (o->out_len + 4096 > *cap) {
            size_t ncap = *cap * 2;
            char *nb = realloc(o->out, ncap);
            if (!nb) { o->output_limit = 1; break; }
            o->out = nb;
            *cap = ncap;
        }
        ssize_t n = read(out_fd, o->out + o->out_len, *cap - o->out_len - 1);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) { eof = 1; continue; }
        o->out_len += (size_t)n;
        if (o->out_len > r->lim->max_output) { o->output_limit = 1; break; }
    }
}

/* The last bytes of stderr, for MemoryError and the error line. */
static void read_err_tail(int err_fd, struct outcome *o)
{
    off_t size = lseek(err_fd, 0, SEEK_END);
    if (size > 0) {
        off_t from = size > (off_t)sizeof o->err_tail - 1 ? size - (off_t)sizeof o->err_tail + 1 : 0;
        ssize_t n = pread(err_fd, o->err_tail, sizeof o->err_tail - 1, from);
        if (n > 0) o->err_tail[n] = '\0';
    }
}

static int run_case(const struct run *r, const char *tmpdir, const char *input,
                    struct outcome *o, struct eb_err *e)
{
    memset(o, 0, sizeof *o);
    int in_fd = temp_fd(tmpdir, input, strlen(input), e);
    if (in_fd < 0) return -1;
    int err_fd = temp_fd(tmpdir, "", 0, e);
    if (err_fd < 0) { close(in_fd); return -1; }
    int out_p[2], st_p[2];
    if (pipe2(out_p, O_CLOEXEC) < 0) {
        close(in_fd); close(err_fd);
        return eb_fail(e, "code grader: pipe: %s", strerror(errno));
    }
    if (pipe2(st_p, O_CLOEXEC) < 0) {
        close(in_fd); close(err_fd); close(out_p[0]); close(out_p[1]);
        return eb_fail(e, "code grader: pipe: %s", strerror(errno));
    }
    size_t cap = 4096;
    o->out = malloc(cap);
    if (!o->out) {
        close(in_fd); close(err_fd); close(out_p[0]); close(out_p[1]); close(st_p[0]); close(st_p[1]);
        return eb_fail(e, "code grader: out of memory");
    }

    pid_t pid = fork();
    if (pid == 0) child_exec(r, in_fd, out_p[1], err_fd, st_p[1]);
    int fork_errno = errno;
    close(in_fd);
    close(out_p[1]);
    close(st_p[1]);
    if (pid < 0) {
        close(err_fd); close(out_p[0]); close(st_p[0]);
        free(o->out); o->out = NULL;
        return eb_fail(e, "code grader: fork: %s", strerror(fork_errno));
    }
    double deadline = clock_now_s() + r->lim->wall_s;

    char st[2 + sizeof(int)];
    size_t got = read_status(st_p[0], st, sizeof st);
    close(st_p[0]);
    o->net_isolated = got >= 1 && st[0] == 'N';

    int status = 0;
    collect_output(r, pid, out_p[0], deadline, o, &cap);
    close(out_p[0]);
    kill_group_and_reap(pid, &status, &o->cpu_s);
    o->status = status;
    o->out[o->out_len] = '\0';

    read_err_tail(err_fd, o);
    close(err_fd);

    if (got >= 2 && st[1] == 'E') {
        int err = 0;
        if (got == sizeof st) memcpy(&err, st + 2, sizeof err);
        free(o->out); o->out = NULL;
        return eb_fail(e, "%s: cannot execute: %s", r->python, strerror(err));
    }
    return 0;
}

/* ---- grading ------------------------------------------------------------ */

/* "python3" on PATH, resolved before fork so the child only calls execve. */
static int find_python(const struct code_limits *lim, char *out, size_t cap, struct eb_err *e)
{
    if (lim->python && lim->python[0]) {
        if (access(lim->python, X_OK) != 0)
            return eb_fail(e, "%s: not an executable interpreter", lim->python);
        if (strlen(lim->python) + 1 > cap) return eb_fail(e, "interpreter path too long");
        memcpy(out, lim->python, strlen(lim->python) + 1);
        return 0;
    }
    const char *path = getenv("PATH");
    if (!path || !path[0]) path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t n = strcspn(path, ":");
        if (n > 0 && n + 9 < cap) {
            memcpy(out, path, n);
            memcpy(out + n, "/python3", 9);
            struct stat sb;
            if (stat(out, &sb) == 0 && S_ISREG(sb.st_mode) && access(out, X_OK) == 0) return 0;
        }
        path += n;
        if (*path == ':') path++;
    }
    return eb_fail(e, "python3: not found on PATH (needed to grade code)");
}

/* The child's environment: enough to find and start the interpreter (PATH,
 * HOME and a version manager's PYENV_* settings), a UTF-8 locale, nothing
 * else of ours.  The strings are borrowed from environ. */
static char **child_env(struct eb_err *e)
{
    size_t n = 0, k = 0;
    for (char **v = environ; v && *v; v++) n++;
    char **env = eb_calloc(n + 2, sizeof *env, e);
    if (!env) return NULL;
    for (char **v = environ; v && *v; v++)
        if (strncmp(*v, "PATH=", 5) == 0 || strncmp(*v, "HOME=", 5) == 0 ||
            strncmp(*v, "PYENV_", 6) == 0)
            env[k++] = *v;
    env[k++] = "LC_ALL=C.UTF-8";
    env[k] = NULL;
    return env;
}

static void set_detail(struct code_result *res, int test, const char *what, const char *tail)
{
    /* the last non-empty line of stderr says most (e.g. "ZeroDivisionError: ...") */
    const char *line = "";
    size_t len = 0;
    if (tail) {
        size_t n = strlen(tail);
        while (n && code_is_space(tail[n - 1])) n--;
        size_t a = n;
        while (a && tail[a - 1] != '\n') a--;
        line = tail + a;
        len = n - a;
        if (len > 160) len = 160;
    }
    snprintf(res->detail, sizeof res->detail, "test %d: %s%s%.*s", test, what, len ? ": " : "",
             (int)len, line);
}

static int parse_tests(const char *tests_json, cJSON **out, int *n, struct eb_err *e)
{
    cJSON *tests = tests_json ? cJSON_Parse(tests_json) : NULL;
    if (!tests) return eb_fail(e, "code tests: not valid JSON");
    if (!cJSON_IsArray(tests) || cJSON_GetArraySize(tests) == 0) {
        cJSON_Delete(tests);
        return eb_fail(e, "code tests: expected a non-empty JSON array of {\"input\",\"output\"}");
    }
    int i = 0;
    for (const cJSON *t = tests->child; t; t = t->next, i++) {
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(t, "input");
        const cJSON *outp = cJSON_GetObjectItemCaseSensitive(t, "output");
        if (!cJSON_IsObject(t) || !cJSON_IsString(in) || !cJSON_IsString(outp)) {
            cJSON_Delete(tests);
            return eb_fail(e, "code tests: case %d: needs string fields \"input\" and \"output\"", i);
        }
    }
    *out = tests;
    *n = i;
    return 0;
}

/* A private directory for one grading: the program starts there (files it
 * writes stay there) and it is removed afterwards. */
static int make_workdir(const char *tmpdir, const char *code, char *dir, size_t cap,
                        char *script, size_t scap, struct eb_err *e)
{
    int len = snprintf(dir, cap, "%s/evictbench-code-XXXXXX", tmpdir);
    if (len < 0 || (size_t)len >= cap || (size_t)len + 9 >= scap)
        return eb_fail(e, "%s: temporary directory path too long", tmpdir);
    if (!mkdtemp(dir))
        return eb_fail(e, "%s: cannot create a temporary directory: %s", tmpdir, strerror(errno));
    snprintf(script, scap, "%s/main.py", dir);
    int fd = open(script, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        int err = errno;
        rmdir(dir);
        return eb_fail(e, "%s: cannot create: %s", script, strerror(err));
    }
    size_t n = strlen(code), off = 0;
    int err = 0;
    while (off < n && !err) {
        ssize_t w = write(fd, code + off, n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) err = errno ? errno : EIO;
        else off += (size_t)w;
    }
    if (close(fd) != 0 && !err) err = errno;
    if (err) {
        unlink(script);
        rmdir(dir);
        return eb_fail(e, "%s: cannot write: %s", script, strerror(err));
    }
    return 0;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    remove(path);
    return 0;
}

static void remove_workdir(const char *dir)
{
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* "expected "7", got "-1"": the first lines, escaped and cut short */
static void describe_mismatch(char *out, size_t cap, const char *got, size_t got_len,
                              const char *want)
{
    char g[48], w[48];
    const char *src[2] = {got, want};
    size_t lens[2] = {got_len, strlen(want)};
    char *dst[2] = {g, w};
    for (int k = 0; k < 2; k++) {
        size_t j = 0, i = 0;
        while (i < lens[k] && code_is_space(src[k][i])) i++;
        for (; i < lens[k] && j + 5 < sizeof g; i++) {
            unsigned char c = (unsigned char)src[k][i];
            if (c == '\n') { dst[k][j++] = '\\'; dst[k][j++] = 'n'; }
            else if (c < 32 || c == '"' || c == 127) dst[k][j++] = '?';
            else dst[k][j++] = (char)c;
        }
        if (i < lens[k]) { memcpy(dst[k] + j, "...", 3); j += 3; }
        dst[k][j] = '\0';
    }
    snprintf(out, cap, "wrong answer (expected \"%s\", got \"%s\")", w, g);
}

/* The verdict of one finished case; what (cap bytes) says why, show_err
 * asks for the end of stderr in the detail. */
static enum code_verdict classify(const struct outcome *o, const struct code_limits *lim,
                                  const char *want, char *what, size_t cap, int *show_err)
{
    enum code_verdict v = CODE_PASS;
    what[0] = '\0';
    if (o->output_limit) {
        v = CODE_OUTPUT_LIMIT;
        snprintf(what, cap, "more than %zu bytes of output", lim->max_output);
    } else if (o->wall_timeout) {
        v = CODE_TIME_LIMIT;
        snprintf(what, cap, "wall-clock limit of %g s", lim->wall_s);
    } else if (WIFSIGNALED(o->status) &&
               (WTERMSIG(o->status) == SIGXCPU || o->cpu_s >= lim->cpu_s)) {
        v = CODE_TIME_LIMIT;
        snprintf(what, cap, "CPU limit of %g s", lim->cpu_s);
    } else if (strstr(o->err_tail, "MemoryError") &&
               !(WIFEXITED(o->status) && WEXITSTATUS(o->status) == 0)) {
        v = CODE_MEMORY_LIMIT;
        snprintf(what, cap, "memory limit of %zu MiB", lim->mem_bytes >> 20);
    } else if (WIFSIGNALED(o->status)) {
        v = CODE_RUNTIME_ERROR;
        snprintf(what, cap, "killed by signal %d", WTERMSIG(o->status));
        *show_err = 1;
    } else if (!WIFEXITED(o->status) || WEXITSTATUS(o->status) != 0) {
        v = CODE_RUNTIME_ERROR;
        snprintf(what, cap, "exit status %d", WEXITSTATUS(o->status));
        *show_err = 1;
    } else if (!code_outputs_match(o->out, o->out_len, want)) {
        v = CODE_WRONG_ANSWER;
        describe_mismatch(what, cap, o->out, o->out_len, want);
    }
    return v;
}

int code_grade(const char *model_output, const char *tests_json,
               const struct code_limits *lim_in, struct code_result *res, struct eb_err *e)
{
    struct code_limits lim;
    if (lim_in) lim = *lim_in;
    else code_limits_default(&lim);
    memset(res, 0, sizeof *res);
    res->failed_test = -1;
    if (!(lim.cpu_s > 0) || !(lim.wall_s > 0) || lim.mem_bytes < ((size_t)16 << 20) || lim.max_output == 0)
        return eb_fail(e, "code grader: limits must be positive (memory at least 16 MiB)");

    cJSON *tests = NULL;
    if (parse_tests(tests_json, &tests, &res->n_tests, e)) return -1;
    char *code = NULL;
    if (code_extract_last_block(model_output ? model_output : "", &code, e)) {
        cJSON_Delete(tests);
        return -1;
    }
    if (!code || all_ws(code)) {
        free(code);
        cJSON_Delete(tests);
        res->verdict = CODE_NO_CODE;
        res->failed_test = 0;
        snprintf(res->detail, sizeof res->detail, "no closed ```python block in the output");
        return 0;
    }

    char python[4096], workdir[4096], script[4096 + 16];
    const char *tmpdir = getenv("TMPDIR");
    if (!tmpdir || !tmpdir[0]) tmpdir = "/tmp";
    char **envp = NULL;
    int rc = find_python(&lim, python, sizeof python, e);
    if (!rc) rc = (envp = child_env(e)) ? 0 : -1;
    if (!rc) rc = make_workdir(tmpdir, code, workdir, sizeof workdir, script, sizeof script, e);
    free(code);
    if (rc) { free(envp); cJSON_Delete(tests); return -1; }

    struct rlimit nofile;
    struct run r = {.python = python, .script = script, .workdir = workdir, .envp = envp,
                    .lim = &lim, .max_fd = 1024};
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY &&
        nofile.rlim_cur < 65536)
        r.max_fd = (int)nofile.rlim_cur;

    res->verdict = CODE_PASS;
    int i = 0;
    for (const cJSON *t = tests->child; t; t = t->next, i++) {
        const char *in = cJSON_GetObjectItemCaseSensitive(t, "input")->valuestring;
        const char *want = cJSON_GetObjectItemCaseSensitive(t, "output")->valuestring;
        struct outcome o;
        if (run_case(&r, tmpdir, in, &o, e)) { rc = -1; break; }
        res->net_isolated = o.net_isolated;
        char what[160];
        int show_err = 0;
        enum code_verdict v = classify(&o, &lim, want, what, sizeof what, &show_err);
        if (v != CODE_PASS) {
            res->verdict = v;
            res->failed_test = i;
            set_detail(res, i, what, show_err ? o.err_tail : NULL);
            free(o.out);
            break;
        }
        free(o.out);
        res->n_passed++;
    }
    remove_workdir(workdir);
    free(envp);
    cJSON_Delete(tests);
    if (rc) { memset(res, 0, sizeof *res); res->failed_test = -1; return -1; }
    res->passed = res->verdict == CODE_PASS;
    return 0;
}

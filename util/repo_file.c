#include "repo_file.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int eb_path_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

const char *eb_base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static int put(char *out, size_t cap, const char *a, const char *b, const char *c)
{
    int n = snprintf(out, cap, "%s%s%s", a, b, c);
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

int eb_repo_file(const char *rel, char *out, size_t cap, char *root, size_t root_cap)
{
    if (eb_path_exists(rel)) {
        if (put(out, cap, rel, "", "") || (root && put(root, root_cap, ".", "", ""))) return -1;
        return 0;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    const char *ups[] = {"", "/.."};
    for (int i = 0; i < 2; i++) {
        char dir[PATH_MAX];
        if (put(dir, sizeof dir, exe, ups[i], "") || put(out, cap, dir, "/", rel)) continue;
        if (!eb_path_exists(out)) continue;
        if (root && put(root, root_cap, dir, "", "")) return -1;
        return 0;
    }
    return -1;
}

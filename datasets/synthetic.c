/* synthetic.c - the built-in dataset: multi-step arithmetic word problems
 * with exact integer answers, generated from a seed.
 *
 * It is the embedded default when no data directory exists, so a fresh
 * clone can run an experiment end to end.  Three templates (an inventory
 * that changes over 2-4 steps, shopping with change, a machine's output
 * over several days); every number is drawn from a splitmix64 stream seeded
 * by (seed, index) and the answer is computed alongside the text, in
 * integers.  Problem i depends only on (seed, i): the same seed gives the
 * same bytes on every platform, and fewer problems give a prefix. */
#include "dataset.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t next_u64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in [lo, hi] (the modulo bias is irrelevant here) */
static int rnd(uint64_t *s, int lo, int hi)
{
    return lo + (int)(next_u64(s) % (uint64_t)(hi - lo + 1));
}

struct person { const char *name, *he, *his, *him; };
static const struct person people[] = {
    {"Tom", "he", "his", "him"},     {"Maria", "she", "her", "her"},
    {"Ravi", "he", "his", "him"},    {"Aiko", "she", "her", "her"},
    {"Lucas", "he", "his", "him"},   {"Fatima", "she", "her", "her"},
    {"Omar", "he", "his", "him"},    {"Elena", "she", "her", "her"},
};

struct goods { const char *items, *containers; };
static const struct goods stock[] = {
    {"apples", "bags"},   {"cookies", "trays"}, {"marbles", "jars"},
    {"stickers", "sheets"}, {"books", "boxes"}, {"eggs", "cartons"},
    {"pencils", "packs"}, {"stamps", "albums"},
};

struct machine { const char *what, *things; };
static const struct machine machines[] = {
    {"machine", "bolts"}, {"printer", "pages"}, {"oven", "loaves"}, {"loom", "scarves"},
};

static const char *shop_items[] = {"notebooks", "pens", "mugs", "candles", "toys", "caps"};

/* Appends to a fixed buffer; overflow cannot happen with these templates
 * (the longest problem is far below the size) but is still checked. */
struct text { char buf[1024]; size_t len; int overflow; };

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->len, sizeof t->buf - t->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof t->buf - t->len) t->overflow = 1;
    else t->len += (size_t)n;
}

static void capital(char *dst, const char *src, size_t cap)
{
    snprintf(dst, cap, "%s", src);
    if (dst[0] >= 'a' && dst[0] <= 'z') dst[0] = (char)(dst[0] - 'a' + 'A');
}

/* An amount that changes over 2-4 steps. */
static long inventory(uint64_t *rs, struct text *t, int *steps)
{
    const struct person *p = &people[rnd(rs, 0, 7)];
    const struct goods *g = &stock[rnd(rs, 0, 7)];
    char He[16];
    capital(He, p->he, sizeof He);
    long v = rnd(rs, 5, 40);
    put(t, "%s has %ld %s.", p->name, v, g->items);
    *steps = rnd(rs, 2, 4);
    for (int s = 0; s < *steps; s++) {
        const char *then = s ? "Then " : "";
        const char *who = s ? p->he : He;
        /* draw until an operation applies to the current amount (counts stay
         * >= 2 so every noun can be plural) */
        for (;;) {
            int op = rnd(rs, 0, 5);
            if (op == 0) {
                int k = rnd(rs, 2, 6), m = rnd(rs, 2, 12);
                put(t, " %s%s buys %d %s with %d %s each.", then, who, k, g->containers, m,
                    g->items);
                v += (long)k * m;
            } else if (op == 1 && v >= 3) {
                int k = rnd(rs, 2, (int)(v <= 30 ? v - 1 : 30));
                put(t, " %s%s gives away %d %s.", then, who, k, g->items);
                v -= k;
            } else if (op == 2) {
                int k = rnd(rs, 2, 20);
                put(t, " %s%s finds %d more %s.", then, who, k, g->items);
                v += k;
            } else if (op == 3 && v <= 500) {
                put(t, " %s friend gives %s as many %s as %s already has.", s ? "Then a" : "A",
                    p->him, g->items, p->he);
                v *= 2;
            } else if (op == 4 && v >= 4) {
                int divisors[4], nd = 0;
                for (int k = 2; k <= 5; k++)
                    if (v % k == 0) divisors[nd++] = k;
                if (!nd) continue;
                int k = divisors[rnd(rs, 0, nd - 1)];
                put(t, " %s%s splits %s %s into %d equal groups and keeps one group.", then, who,
                    p->his, g->items, k);
                v /= k;
            } else if (op == 5 && v >= 6) {
                int d = rnd(rs, 2, 4);
                long most = v / d;
                if (most < 2) continue;
                int k = rnd(rs, 2, (int)(most < 6 ? most : 6));
                put(t, " %s%s uses %d %s a day for %d days.", then, who, k, g->items, d);
                v -= (long)k * d;
            } else {
                continue;
            }
            break;
        }
    }
    put(t, " How many %s does %s have now?", g->items, p->name);
    return v;
}

/* Two purchases, maybe a coupon, paid with the smallest bill that covers it. */
static long shopping(uint64_t *rs, struct text *t, int *steps)
{
    const struct person *p = &people[rnd(rs, 0, 7)];
    int i1 = rnd(rs, 0, 5), i2 = (i1 + rnd(rs, 1, 5)) % 6;
    int a = rnd(rs, 2, 6), pa = rnd(rs, 2, 9), b = rnd(rs, 2, 6), pb = rnd(rs, 2, 9);
    char He[16];
    capital(He, p->he, sizeof He);
    long total = (long)a * pa + (long)b * pb;
    put(t, "%s buys %d %s at $%d each and %d %s at $%d each.", p->name, a, shop_items[i1], pa,
        b, shop_items[i2], pb);
    *steps = 3;
    if (rnd(rs, 0, 1)) {
        int off = rnd(rs, 1, 5);
        put(t, " %s uses a coupon for $%d off the total.", He, off);
        total -= off;
        *steps = 4;
    }
    static const int bills[] = {20, 50, 100};
    int bill = 200;
    for (int i = 0; i < 3; i++)
        if (bills[i] > total) { bill = bills[i]; break; }
    put(t, " %s pays with a $%d bill. How many dollars of change does %s get?", He, bill, p->he);
    return bill - total;
}

/* Output per hour over two or three days. */
static long production(uint64_t *rs, struct text *t, int *steps)
{
    const struct machine *m = &machines[rnd(rs, 0, 3)];
    int r = rnd(rs, 3, 25), h1 = rnd(rs, 3, 9), d = rnd(rs, 1, 2), longer = rnd(rs, 0, 1);
    int h2 = longer ? h1 + d : h1 - d;
    put(t, "A %s makes %d %s per hour. On Monday it runs for %d hours. On Tuesday it runs %d "
        "hour%s %s than on Monday.", m->what, r, m->things, h1, d, d == 1 ? "" : "s",
        longer ? "longer" : "less");
    long hours = h1 + h2;
    *steps = 3;
    if (rnd(rs, 0, 1)) {
        put(t, " On Wednesday it runs twice as long as on Tuesday.");
        hours += 2L * h2;
        *steps = 4;
    }
    put(t, " How many %s does it make on these days in total?", m->things);
    return (long)r * hours;
}

static char *dup_text(const char *s, struct eb_err *e)
{
    size_t n = strlen(s) + 1;
    char *p = eb_malloc(n, e);
    if (p) memcpy(p, s, n);
    return p;
}

int synthetic_generate(int n, uint32_t seed, struct dataset *out, struct eb_err *e)
{
    static const char *templates[] = {"inventory", "shopping", "production"};
    memset(out, 0, sizeof *out);
    if (n < 1 || n > SYNTHETIC_MAX_N)
        return eb_fail(e, "synthetic: %d problems asked, need 1..%d", n, SYNTHETIC_MAX_N);
    struct dataset d = {.spec = dataset_find("synthetic", NULL)};
    d.items = eb_calloc((size_t)n, sizeof *d.items, e);
    if (!d.items) return -1;
    for (int i = 0; i < n; i++) {
        uint64_t rs = ((uint64_t)seed << 32) ^ (uint64_t)(uint32_t)i;
        next_u64(&rs);  /* decorrelate neighbouring seeds */
        int tpl = rnd(&rs, 0, 2), steps = 0;
        struct text t = {.len = 0, .overflow = 0};
        long answer = tpl == 0 ? inventory(&rs, &t, &steps)
                    : tpl == 1 ? shopping(&rs, &t, &steps)
                               : production(&rs, &t, &steps);
        if (t.overflow) {
            dataset_free(&d);
            return eb_fail(e, "synthetic: problem %d does not fit its buffer", i);
        }
        char id[48], ans[32], extra[160];
        snprintf(id, sizeof id, "synthetic-%" PRIu32 "-%d", seed, i);
        snprintf(ans, sizeof ans, "%ld", answer);
        snprintf(extra, sizeof extra,
                 "{\"template\":\"%s\",\"steps\":%d,\"seed\":%" PRIu32 ",\"index\":%d}",
                 templates[tpl], steps, seed, i);
        struct dataset_item *it = &d.items[i];
        d.n = i + 1;
        if (!(it->id = dup_text(id, e)) || !(it->problem = dup_text(t.buf, e)) ||
            !(it->answer = dup_text(ans, e)) || !(it->extra_json = dup_text(extra, e))) {
            dataset_free(&d);
            return -1;
        }
    }
    *out = d;
    return 0;
}

static int parse_long(const char *s, size_t len, long lo, long hi, long *v)
{
    char tmp[24];
    if (len == 0 || len >= sizeof tmp) return -1;
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    for (size_t i = 0; i < len; i++)
        if (tmp[i] < '0' || tmp[i] > '9') return -1;
    errno = 0;
    long x = strtol(tmp, NULL, 10);
    if (errno || x < lo || x > hi) return -1;
    *v = x;
    return 0;
}

int synthetic_parse_name(const char *name, int *n, uint32_t *seed, struct eb_err *e)
{
    *n = SYNTHETIC_DEFAULT_N;
    *seed = SYNTHETIC_DEFAULT_SEED;
    const char *base = "synthetic";
    size_t bl = strlen(base);
    if (!name || strncmp(name, base, bl) != 0 || (name[bl] && name[bl] != ':'))
        return eb_fail(e, "%s: not a synthetic dataset name", name ? name : "(null)");
    if (!name[bl]) return 0;
    const char *a = name + bl + 1;
    const char *colon = strchr(a, ':');
    size_t alen = colon ? (size_t)(colon - a) : strlen(a);
    long v;
    if (parse_long(a, alen, 1, SYNTHETIC_MAX_N, &v))
        return eb_fail(e, "%s: expected synthetic:N[:SEED] with N in 1..%d", name,
                       SYNTHETIC_MAX_N);
    *n = (int)v;
    if (colon) {
        if (parse_long(colon + 1, strlen(colon + 1), 0, 4294967295L, &v))
            return eb_fail(e, "%s: SEED must be an integer in 0..4294967295", name);
        *seed = (uint32_t)v;
    }
    return 0;
}

/* policy_style.c - the display name, colour, point type and dash of each
 * policy name (policy_style.h).  Colours are the Okabe-Ito and Tol palettes;
 * a preset shares its policy's point type. */
#include "harness/report/policy_style.h"

#include <string.h>

static const struct policy_style STYLES[] = {
    {.name = "fullkv", .display = "FullKV", .rgb = 0x000000, .point = 4, .dashed = 1},
    {.name = "streamingllm", .display = "StreamingLLM", .rgb = 0x999999, .point = 12},
    {.name = "h2o", .display = "H2O", .rgb = 0xE69F00, .point = 9},
    {.name = "h2o-rkv", .display = "H2O (R-KV baseline)", .rgb = 0xDDCC77, .point = 9},
    {.name = "snapkv", .display = "SnapKV", .rgb = 0x56B4E9, .point = 11},
    {.name = "snapkv-decode", .display = "SnapKV (decode)", .rgb = 0x88CCEE, .point = 11},
    {.name = "rkv", .display = "R-KV", .rgb = 0x0072B2, .point = 5},
    {.name = "rkv-code", .display = "R-KV (lambda 0.07)", .rgb = 0x332288, .point = 5},
    {.name = "vase-attnv", .display = "VaSE-AttnV", .rgb = 0x117733, .point = 10},
    {.name = "vase-attn", .display = "VaSE Attn", .rgb = 0x44AA99, .point = 14},
    {.name = "vase-range-attn", .display = "VaSE range+Attn", .rgb = 0x999933, .point = 14},
    {.name = "vase-attn-rkv", .display = "VaSE Attn+R-KV", .rgb = 0x6699CC, .point = 14},
    {.name = "vase-dkv", .display = "VaSE-DKV", .rgb = 0x882255, .point = 10},
    {.name = "curdkv", .display = "CurDKV", .rgb = 0xCC6677, .point = 10},
    {.name = "rpc", .display = "RPC", .rgb = 0x661100, .point = 2},
    {.name = "rpc-fixed", .display = "RPC (fixed budget)", .rgb = 0x994455, .point = 2},
    {.name = "beaconkv", .display = "BeaconKV", .rgb = 0xAA4499, .point = 8},
    {.name = "seal", .display = "SEAL", .rgb = 0x8C564B, .point = 3},
    {.name = "skipkv", .display = "SkipKV", .rgb = 0xD55E00, .point = 7},
    /* no longer a registry row (it was skipkv under a second name); kept so
     * that runs stored under it are still drawn as SkipKV */
    {.name = "skipkv-full", .display = "SkipKV", .rgb = 0xD55E00, .point = 7},
    {.name = "skipkv-sent", .display = "SkipKV (sentence only)", .rgb = 0xCC79A7, .point = 13},
    {.name = "skipkv-sent-steer", .display = "SkipKV (no grouping)", .rgb = 0x009E73,
     .point = 15},
    {.name = "seal-static", .display = "static steering", .rgb = 0x8C564B, .point = 3},
    {.name = "fullkv-pss", .display = "FullKV (PSS tracking)", .rgb = 0x555555, .point = 4,
     .dashed = 1},
    {.name = "knorm", .display = "KNorm", .rgb = 0x7F7F7F, .point = 6},
    {.name = "tova", .display = "TOVA", .rgb = 0x17BECF, .point = 1},
    {.name = "random", .display = "Random", .rgb = 0xB0B0B0, .point = 6},
    {.name = "keydiff", .display = "KeyDiff", .rgb = 0xBCBD22, .point = 7},
    {.name = "lagkv", .display = "LagKV", .rgb = 0x9467BD, .point = 8},
    {.name = "expected-attention", .display = "Expected Attention", .rgb = 0x2CA02C, .point = 10},
    {.name = "adakv-snapkv", .display = "AdaKV (SnapKV)", .rgb = 0xFF7F0E, .point = 16},
    {.name = "adakv-rkv", .display = "AdaKV (R-KV)", .rgb = 0x1F77B4, .point = 16},
    {.name = "pyramidkv", .display = "PyramidKV", .rgb = 0xE377C2, .point = 17},
    {.name = "lazyeviction", .display = "LazyEviction", .rgb = 0x7F3C8D, .point = 12},
    {.name = "prefill", .display = "prefill only", .rgb = 0x6B8E23, .point = 5},
    {.name = "decoding", .display = "DecodingPress", .rgb = 0x4682B4, .point = 9},
    {.name = "prefill-decoding", .display = "PrefillDecodingPress", .rgb = 0xCD853F, .point = 11},
};

const struct policy_style *policy_styles(int *n)
{
    *n = (int)(sizeof STYLES / sizeof STYLES[0]);
    return STYLES;
}

struct policy_style policy_style_of(const char *name)
{
    for (size_t i = 0; name && i < sizeof STYLES / sizeof STYLES[0]; i++)
        if (!strcmp(STYLES[i].name, name)) return STYLES[i];
    const char *shown = name ? name : "?";
    return (struct policy_style){.name = shown, .display = shown, .rgb = -1, .point = 0,
                                 .dashed = 0};
}

const char *policy_display_name(const char *name)
{
    return policy_style_of(name).display;
}

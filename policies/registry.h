/* registry.h - policy names -> constructors with typed parameters.
 *
 * A policy is named on the command line as NAME[:key=value,...] (e.g.
 * "rkv:lambda=0.07,gqa=mean") and in experiment configs as a JSON object
 * {"name": "rkv", "lambda": 0.07} (or {"name": ..., "params": {...}}).
 * Every parameter has a type, a range and a default from
 * ../shared/specs/policies.md; an unknown key or a bad value is an error that
 * lists the valid keys.  Presets (e.g. snapkv-decode, rkv-code) are registry
 * entries that share a policy's code and change its defaults. */
#ifndef EB_POLICY_REGISTRY_H
#define EB_POLICY_REGISTRY_H

#include <cjson/cJSON.h>

#include "policy.h"

/* A parameter's value by key (an int, a 0/1 bool or a choice index is a
 * whole double).  Policies only ask for keys of their own table; an unknown
 * key yields NaN / 0. */
double policy_param(const struct policy_params *p, const char *key);
/* The index of key in p, or -1: the one lookup (registry, point). */
int policy_param_index(const struct policy_params *p, const char *key);
/* Choice idx of "a|b|c" into buf ("?" past the end). */
const char *policy_choice_name(const char *choices, int idx, char *buf, size_t size);
int policy_param_int(const struct policy_params *p, const char *key);

/* How figures and tables show an entry: the one place for it (the harness
 * writes the gnuplot palette from these, harness/report/palette.c). */
struct policy_style {
    const char *display;      /* legend and table name, e.g. "R-KV" */
    int rgb;                  /* line colour 0xRRGGBB; -1: one by series number */
    int point;                /* gnuplot point type; 0: one by series number */
    int dashed;               /* 1: drawn dashed, as a reference (FullKV) */
};

struct policy_entry {
    const char *name;
    const char *summary;
    const struct policy_ops *ops;
    const struct param_def *params;
    const char *preset;       /* "key=value,..." defaults that differ from params, or NULL */
    struct policy_style style;
    int keeps_all;            /* 1: evicts nothing (fullkv, seal, fullkv-pss), so a sweep gives
                                 it no budget (POLICY_NO_BUDGET); the one flag, with evict=0
                                 (policy_keeps_all): create's POLICY_NEVER must agree */
};

/* All entries, in a stable order. */
const struct policy_entry *policy_registry(int *n);
const struct policy_entry *policy_registry_find(const char *name);
/* 1 if the entry NAME of a spec NAME[:key=value,...] evicts nothing (takes no
 * budget); 0 for any other name. */
int policy_spec_keeps_all(const char *spec);
/* 1 if the entry evicts nothing with these parameters: its keeps_all, or a
 * parameter evict = 0 (skipkv:evict=0).  policy_instantiate checks that
 * create's schedule agrees (POLICY_NEVER exactly then). */
int policy_keeps_all(const struct policy_entry *entry, const struct policy_params *p);
/* The display name of a registry entry ("rkv" -> "R-KV"); any other name
 * (NULL: "?") is returned as it is. */
const char *policy_display_name(const char *name);

/* Parse NAME[:key=value,...] into its entry and resolved parameters.  Needs
 * no model, so configs can be checked before anything loads. */
int policy_parse(const char *spec, const struct policy_entry **entry, struct policy_params *out,
                 struct eb_err *e);
/* The same from JSON: a string (parsed as above) or an object with "name"
 * and the parameters, either inline or under "params". */
int policy_parse_json(const cJSON *j, const struct policy_entry **entry,
                      struct policy_params *out, struct eb_err *e);

/* Build an instance for a model. */
int policy_instantiate(const struct policy_entry *entry, const struct policy_params *params,
                       const struct policy_model *m, struct policy **out, struct eb_err *e);
/* policy_parse + policy_instantiate. */
int policy_create(const char *spec, const struct policy_model *m, struct policy **out,
                  struct eb_err *e);

/* "name:key=value,..." with every parameter, choices by name. */
void policy_params_format(const struct policy_entry *entry, const struct policy_params *p,
                          char *buf, size_t size);

#endif

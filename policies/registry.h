/* registry.h - policy names -> constructors with typed parameters.
 *
 * A policy is named on the command line as NAME[:key=value,...] (e.g.
 * "rkv:lambda=0.07,gqa=mean") and in experiment configs as a JSON object
 * {"name": "rkv", "lambda": 0.07} (or {"name": ..., "params": {...}}).
 * Every parameter has a type, a range and a default from
 * ../shared/specs/policies.md; an unknown key or a bad value is an error that
 * lists the valid keys.  Presets (e.g. snapkv-decode, rkv-code) are registry
 * entries that share a policy's code and change its defaults.
 *
 * Both forms resolve once, at the edge, into a struct policy_params: the
 * table defaults, the preset, the user's values and, where a run's model is
 * known, the per-model defaults (policy_defaults.h), each value parsed once
 * by param_parse.h.  The files: registry.c (the table alone), registry_find.c
 * (lookups), policy_instance.c (instances),
 * policy_spec.c (resolving a spec or a JSON object), policy_format.c (a
 * resolved policy as text or JSON), param_parse.c (the values). */
#ifndef EB_POLICY_REGISTRY_H
#define EB_POLICY_REGISTRY_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "policy.h"

/* A parameter's value by key (an int, a 0/1 bool or a choice index is a
 * whole double).  Policies only ask for keys of their own table; an unknown
 * key is a bug in the caller and aborts with the key and the row's keys
 * (policy_param_index asks without that). */
double policy_param(const struct policy_params *p, const char *key);
/* The index of key in p, or -1: the one lookup (registry, point). */
int policy_param_index(const struct policy_params *p, const char *key);
/* Choice idx of "a|b|c" into buf ("?" past the end). */
const char *policy_choice_name(const char *choices, int idx, char *buf, size_t size);
int policy_param_int(const struct policy_params *p, const char *key);

/* A row of the table.  Presentation (display name, colour) is no part of it:
 * harness/report/policy_style.h keys that by name, so the run key's code hash
 * (which covers policies/) does not change with a colour. */
struct scorer_row;   /* row.h */

/* A row of the table names either a scorer row (row.h: the registry builds
 * the policy) or a vtable of the policy's own (VaSE, RPC, BeaconKV, SEAL,
 * SkipKV and the others that need more than a score). */
struct policy_entry {
    const char *name;
    const char *summary;
    const struct scorer_row *row;
    const struct policy_ops *ops;
    const struct param_def *params;
    const char *preset;       /* "key=value,..." defaults that differ from params, or NULL */
    const char *sources;      /* this policy's own files in policies/, space-separated
                                 ("rkv.c rkv.h"): with the shared code, what its run keys'
                                 code hash covers (harness/exp/code_hash.h) */
    int keeps_all;            /* 1: evicts nothing (fullkv, seal, fullkv-pss), so a sweep gives
                                 it no budget (POLICY_NO_BUDGET); the one flag, with evict=0
                                 (policy_keeps_all): create's POLICY_NEVER must agree */
};

/* The shared parameter table of an entry (its row's or its vtable's), or NULL. */
const struct param_def *policy_entry_shared(const struct policy_entry *en);
/* The slots an instance of en with p will always keep (its window), known
 * before any instance: a row's configure, or the vtable's window_of; -1 when
 * only create knows it. */
int policy_entry_window(const struct policy_entry *en, const struct policy_params *p);
/* policy_budget_check (schedule.h) for en with p, before any instance. */
int policy_entry_budget_check(const struct policy_entry *en, const struct policy_params *p,
                              int budget, struct eb_err *e);

/* All entries, in a stable order. */
const struct policy_entry *policy_registry(int *n);
const struct policy_entry *policy_registry_find(const char *name);
/* The entry named by the len bytes at name, or NULL (with e: set to a message
 * listing the known names). */
const struct policy_entry *policy_registry_find_n(const char *name, size_t len,
                                                  struct eb_err *e);
/* 1 if the entry evicts nothing with these parameters: its keeps_all, or a
 * parameter evict = 0 (skipkv:evict=0, fullkv-pss).  The one predicate:
 * policy_instantiate checks that create's schedule agrees (POLICY_NEVER
 * exactly then), and the two forms below ask it. */
int policy_keeps_all(const struct policy_entry *entry, const struct policy_params *p);
/* policy_keeps_all of a spec NAME[:key=value,...], resolved without per-model
 * defaults; 0 for a spec that does not resolve. */
int policy_spec_keeps_all(const char *spec);
/* The same for entry `name` with a config's params (JSON, NULL: none). */
int policy_named_keeps_all(const char *name, const cJSON *params);

/* The model registry's name of a model path ("models/x.gguf" ->
 * "smollm2-135m"), 0; -1 when the path is no registry model.  policies/ does
 * not know model/: harness/ passes model/'s model_registry_name. */
typedef int (*policy_model_name_fn)(const char *path_or_name, char *out, size_t cap);

/* Where a policy runs, for its per-model defaults (policy_defaults.h):
 * model NULL: none; dataset NULL: the model's own only; budget <= 0: no
 * per-budget ones; model_name NULL: a path is looked up by its base name
 * only. */
struct policy_where {
    const char *model;
    const char *dataset;
    int64_t budget;
    policy_model_name_fn model_name;
};

/* Resolve NAME[:key=value,...] into its entry and typed parameters, the
 * per-model defaults of `at` (NULL: none) filled in where neither the user
 * nor the preset sets a key.  Needs no model file, so configs can be checked
 * before anything loads. */
int policy_resolve(const char *spec, const struct policy_where *at,
                   const struct policy_entry **entry, struct policy_params *out, struct eb_err *e);
/* The same for entry `name` with params, a JSON object of parameters (inline,
 * or under "params"; NULL: none), as a config gives them. */
int policy_resolve_named(const char *name, const cJSON *params, const struct policy_where *at,
                         const struct policy_entry **entry, struct policy_params *out,
                         struct eb_err *e);
/* policy_resolve without per-model defaults. */
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
/* The parameters as a JSON object, values typed (a choice by name, a bool as
 * a bool): given_only 0, every one in table order (what a run key hashes);
 * 1, those the user or the per-model defaults gave, in that order (what a run
 * stores).  NULL when out of memory. */
cJSON *policy_params_json(const struct policy_params *p, int given_only);

#endif

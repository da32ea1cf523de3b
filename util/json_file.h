/* json_file.h - reading a small JSON file (a model's config.json, the
 * registry files, policies/policy_defaults.json): one helper every layer may
 * use. */
#ifndef EB_JSON_FILE_H
#define EB_JSON_FILE_H

#include <cjson/cJSON.h>

#include "err.h"

/* Read and parse a JSON file of at most 64 MB; NULL with e set on failure
 * ("PATH: cannot open: ...", "PATH: malformed JSON near byte N", ...).  The
 * caller frees with cJSON_Delete. */
cJSON *eb_json_load(const char *path, struct eb_err *e);

#endif

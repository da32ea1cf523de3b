/* config_model.c - a command's --model: the sweep as written, on another
 * model (config.h). */
#include "harness/exp/config.h"

#include <stdlib.h>
#include <string.h>

/* The config's JSON with "models" set to [model]: what the store keeps with
 * the experiment, so its provenance names the model the points ran on. */
static char *json_with_model(const char *json, const char *model)
{
    cJSON *root = cJSON_Parse(json);
    if (!root) return NULL;
    cJSON *list = cJSON_CreateArray();
    cJSON *name = cJSON_CreateString(model);
    char *s = NULL;
    if (list && name) {
        cJSON_AddItemToArray(list, name);
        name = NULL;
        cJSON_DeleteItemFromObjectCaseSensitive(root, "models");
        if (cJSON_AddItemToObject(root, "models", list)) {
            list = NULL;
            s = cJSON_PrintUnformatted(root);
        }
    }
    cJSON_Delete(name);
    cJSON_Delete(list);
    cJSON_Delete(root);
    return s;
}

int exp_config_set_model(struct exp_config *c, const char *model, struct eb_err *e)
{
    if (!model) return 0;
    if (!*model) return eb_fail(e, "--model: empty model name");
    char **list = malloc(sizeof *list);
    char *name = strdup(model);
    char *json = c->json ? json_with_model(c->json, model) : NULL;
    if (!list || !name || (c->json && !json)) {
        free(list);
        free(name);
        free(json);
        return eb_fail(e, "out of memory");
    }
    for (int i = 0; i < c->n_models; i++) free(c->models[i]);
    free(c->models);
    list[0] = name;
    c->models = list;
    c->n_models = 1;
    if (json) {
        free(c->json);
        c->json = json;
    }
    return 0;
}

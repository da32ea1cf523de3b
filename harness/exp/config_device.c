/* config_device.c - the device a config's points run on: set by a command's
 * --device, written into the copy of the config other processes expand
 * (config.h). */
#include "harness/exp/config.h"

#include <stdlib.h>
#include <string.h>

#include "harness/exp/device.h"

enum kv_type exp_config_kv_type(const struct exp_config *c)
{
    return device_kv_type(c->device, c->kv_type);
}

int exp_config_set_device(struct exp_config *c, const char *device, struct eb_err *e)
{
    if (!device) return 0;
    if (device_syntax_check(device, e)) return -1;
    char *d = strdup(device);
    if (!d) return eb_fail(e, "out of memory");
    free(c->device);
    c->device = d;
    return 0;
}

char *exp_config_json(const struct exp_config *c)
{
    cJSON *root = cJSON_Parse(c->json);
    if (!root) return NULL;
    if (c->device) {
        cJSON_DeleteItemFromObjectCaseSensitive(root, "device");
        if (!cJSON_AddStringToObject(root, "device", c->device)) {
            cJSON_Delete(root);
            return NULL;
        }
    }
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    return s;
}

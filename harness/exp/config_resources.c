/* config_resources.c - does what a config names exist here: model files,
 * datasets.  See config.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/dataset.h"
#include "model/modelfile.h"
#include "harness/exp/config.h"

const char *exp_dataset_resolve(const struct exp_dataset *d, const char *data_dir)
{
    if (dataset_available(d->name, data_dir)) return d->name;
    return NULL;
}

int exp_config_check_resources(const struct exp_config *c, const char *data_dir, struct eb_err *e)
{
    for (int i = 0; i < c->n_models; i++) {
        char path[1024];
        struct eb_err me = {0};
        if (model_resolve(c->models[i], path, sizeof path, &me))
            return eb_fail(e, "%s: $.models[%d]: model \"%.100s\" is not available: %s", c->source, i,
                           c->models[i], me.msg);
    }
    if (c->steer_vector) {
        FILE *f = fopen(c->steer_vector, "rb");
        if (!f)
            return eb_fail(e, "%s: $.steer_vector: \"%.200s\": %s (make one with `evictbench "
                              "calibrate`)", c->source, c->steer_vector, strerror(errno));
        fclose(f);
    }
    for (int i = 0; i < c->n_datasets; i++) {
        const struct exp_dataset *d = &c->datasets[i];
        if (exp_dataset_resolve(d, data_dir)) continue;
        char dir[1024], file[1200];
        struct eb_err de = {0};
        const struct dataset_spec *spec = dataset_find(d->name, NULL);
        if (dataset_default_data_dir(data_dir, dir, sizeof dir, &de)) snprintf(dir, sizeof dir, "?");
        if (!spec || dataset_file_path(spec, data_dir, file, sizeof file, &de))
            snprintf(file, sizeof file, "%s/%s", dir, d->name);
        return eb_fail(e, "%s: $.datasets[%d]: dataset \"%.60s\" is not available: %.600s not found "
                          "(datasets/data/ ships with the repository: restore it from git, or pass "
                          "--data-dir DIR / set EVICTBENCH_DATA)",
                       c->source, i, d->name, file);
    }
    return 0;
}

/* dataset.c - the dataset container: freeing items and whole datasets.  The
 * two sources (jsonl.c, synthetic.c) fill it; load.c picks the source. */
#include "dataset.h"

#include <stdlib.h>
#include <string.h>

void dataset_item_free(struct dataset_item *it)
{
    free(it->id);
    free(it->problem);
    free(it->answer);
    free(it->extra_json);
    memset(it, 0, sizeof *it);
}

void dataset_free(struct dataset *d)
{
    if (!d) return;
    for (int i = 0; i < d->n; i++) dataset_item_free(&d->items[i]);
    free(d->items);
    memset(d, 0, sizeof *d);
}

/* fuzz_json_schema.c — libFuzzer target for constrained decoding's schema compiler and matcher: any bytes as a
 * JSON Schema must compile or be refused with a status (never crash, never loop: $ref cycles, deep nesting,
 * huge enums, wide anyOf nests), and a compiled constraint must take any document bytes one at a time without
 * a crash, refusing what does not fit and leaving its state unchanged. Input: the schema, then optionally a NUL
 * byte and the document bytes to feed (else a fixed document). An input that starts with a NUL byte uses the
 * "any JSON object" constraint. */
#include <stdint.h>
#include <string.h>

#include "braid.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char def_doc[] = "{\"a\": [1, -2.5e3, \"x\\u00e9\", {\"b\": null}], \"c\": true}";
    const char *schema = (const char *)data;
    size_t sl = size;
    const char *doc = def_doc;
    size_t dl = sizeof def_doc - 1;
    const uint8_t *nul = memchr(data, 0, size);
    if (nul) {
        sl = (size_t)(nul - data);
        doc = (const char *)nul + 1;
        dl = size - sl - 1;
    }
    braid_json_constraint *c = NULL;
    if (braid_json_constraint_new(sl || !nul ? schema : NULL, sl, &c) != BRAID_OK) return 0;
    braid_json_matcher *m = NULL;
    if (braid_json_matcher_new(c, &m) == BRAID_OK) {
        for (size_t i = 0; i < dl; i++) {
            if (braid_json_matcher_feed(m, doc + i, 1) != BRAID_OK) continue; /* refused: the state stays */
            (void)braid_json_matcher_complete(m);
            (void)braid_json_matcher_done(m);
        }
        /* a whole-chunk feed agrees with the state machine too */
        braid_json_matcher_reset(m);
        (void)braid_json_matcher_feed(m, doc, dl);
    }
    braid_json_matcher_free(m);
    braid_json_constraint_free(c);
    return 0;
}

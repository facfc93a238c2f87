/* test_base.c — status names, the last-error text, allocation failure injection, hashing and the string builder. */
#include <string.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "base/status.h"
#include "base/strbuf.h"
#include "test.h"

int main(void) {
    CHECK(!strcmp(braid_status_name(BRAID_OK), "BRAID_OK"), "name of OK");
    CHECK(!strcmp(braid_status_name(BRAID_E_FULL), "BRAID_E_FULL"), "name of FULL");
    CHECK(!strcmp(braid_status_name((braid_status)999), "BRAID_E_UNKNOWN"), "out-of-range status");
    for (int s = 0; s < BRAID_STATUS_COUNT; s++) CHECK(braid_status_name((braid_status)s) != NULL, "status %d", s);

    CHECK(bd_error(BRAID_E_RANGE, "seq %d out of range", 7) == BRAID_E_RANGE, "bd_error returns its status");
    CHECK(!strcmp(braid_last_error(), "seq 7 out of range"), "last error text: %s", braid_last_error());
    bd_error_clear();
    CHECK(braid_last_error()[0] == '\0', "cleared");

    /* The 2nd allocation from now fails, the 1st and 3rd succeed (non-sticky). */
    bd_alloc_fail_at(2, 0);
    void *a = bd_malloc(16), *b = bd_malloc(16), *c = bd_malloc(16);
    CHECK(a && !b && c, "non-sticky injection hits exactly the 2nd allocation");
    bd_free(a);
    bd_free(c);
    bd_alloc_fail_at(1, 1);
    a = bd_malloc(1);
    b = bd_calloc(1, 1);
    CHECK(!a && !b, "sticky injection fails every allocation");
    bd_alloc_fail_at(0, 0);
    CHECK(bd_mallocn(SIZE_MAX / 2, 4) == NULL, "count*size overflow is refused");
    CHECK(bd_calloc(SIZE_MAX / 2, 4) == NULL, "calloc overflow is refused");

    const char msg[] = "braid";
    uint64_t h1 = bd_hash64(msg, 5, 0), h2 = bd_hash64(msg, 5, 1);
    CHECK(h1 != h2, "seed changes the hash");
    bd_hasher hs;
    CHECK(bd_hasher_init(&hs, 0), "hasher init");
    bd_hasher_update(&hs, "br", 2);
    bd_hasher_update(&hs, "aid", 3);
    CHECK(bd_hasher_digest(&hs) == h1, "streaming equals one-shot");
    bd_hasher_free(&hs);

    /* String builder: bytes with NULs, UTF-8 of each length, growth, sticky failure. */
    bd_strbuf sb = {0};
    bd_strbuf_puts(&sb, "ab");
    bd_strbuf_put(&sb, "\0c", 2);
    bd_strbuf_put_cp(&sb, 0xE9);
    bd_strbuf_put_cp(&sb, 0x20AC);
    bd_strbuf_put_cp(&sb, 0x1F999);
    CHECK(bd_strbuf_status(&sb) == BRAID_OK && sb.n == 13 && !memcmp(sb.p, "ab\0c\xC3\xA9\xE2\x82\xAC\xF0\x9F\xA6\x99", 14),
          "strbuf content (%zu bytes)", sb.n);
    for (int i = 0; i < 10000; i++) bd_strbuf_puts(&sb, "xyz");
    CHECK(sb.n == 30013 && sb.p[sb.n] == 0 && !memcmp(sb.p + sb.n - 3, "xyz", 3), "strbuf growth");
    bd_strbuf_put_cp(&sb, 0x110000);
    CHECK(bd_strbuf_status(&sb) == BRAID_E_RANGE && sb.n == 30013, "code point past U+10FFFF refused");
    bd_strbuf_free(&sb);
    bd_alloc_fail_at(2, 0);
    bd_strbuf_puts(&sb, "first");
    for (int i = 0; i < 100; i++) bd_strbuf_puts(&sb, "more text that outgrows the first allocation");
    bd_alloc_fail_at(0, 0);
    CHECK(bd_strbuf_status(&sb) == BRAID_E_NOMEM && sb.n == 5 && !strcmp(sb.p, "first"),
          "a failed growth keeps the content and ignores later appends (%zu bytes)", sb.n);
    bd_strbuf_free(&sb);
    CHECK(sb.p == NULL && sb.n == 0 && bd_strbuf_status(&sb) == BRAID_OK, "free resets");
    TEST_MAIN_END();
}

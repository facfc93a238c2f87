/* test_server_openai_js.c — the official OpenAI JS client (npm `openai`, installed by
 * scripts/fetch-openai-js.sh from setup.sh) against `braid serve` on loopback: tests/server/openai_client.cjs
 * runs chat, streaming, tools, logprobs and text completions through it unchanged and checks the client's
 * error classes for 404 and 401. Skipped (not passed) when node or the package is missing. */
#include <string.h>

#include "braid.h"
#include "genmodel/genmodel.h"
#include "server_harness.h"
#include "test.h"

#define OPENAI_JS_VERSION "6.49.0" /* scripts/fetch-openai-js.sh */

int main(void) {
    const char *build = test_env("BRAID_BUILD_DIR", "."), *src = test_env("BRAID_SOURCE_DIR", "..");
    char pkg[1200], model[1100], exe[1100], logp[1100], args[4000], cmd[8000];
    const char *cache = getenv("BRAID_CACHE");
    char home_cache[1024];
    snprintf(home_cache, sizeof home_cache, "%s/.cache/braid", test_env("HOME", "/root"));
    snprintf(pkg, sizeof pkg, "%s/openai-js/%s/node_modules/openai", cache && *cache ? cache : home_cache,
             OPENAI_JS_VERSION);
    if (access(pkg, R_OK) != 0) TEST_SKIP("the openai package is not installed (%s): run scripts/setup.sh", pkg);
    if (system("node --version >/dev/null 2>&1") != 0) TEST_SKIP("node is not installed");
    snprintf(model, sizeof model, "%s/test_server_openai_js.gguf", build);
    snprintf(exe, sizeof exe, "%s/braid", build);
    snprintf(logp, sizeof logp, "%s/test_server_openai_js.log", build);
    gen_params gp;
    gen_params_default(&gp);
    gp.type = BRAID_TYPE_Q8_0;
    gen_summary sum;
    if (gen_model_write(&gp, model, &sum) != BRAID_OK) TEST_SKIP("no vocabulary to build the model from");
    snprintf(args, sizeof args, "-m '%s' -c 256 -t 1 --parallel 2 --api-key js-key", model);
    hs_server srv;
    CHECK(hs_start(&srv, exe, args, logp), "the server starts");
    if (!srv.port) TEST_MAIN_END();
    snprintf(cmd, sizeof cmd, "node '%s/tests/server/openai_client.cjs' '%s' %d js-key test_server_openai_js.gguf 2>&1",
             src, pkg, srv.port);
    int st = -1;
    char *out = test_run_cmd(cmd, &st);
    printf("%s", out ? out : "");
    CHECK(st == 0 && out && !strstr(out, "FAIL"), "the OpenAI JS client's checks pass (exit %d)", st);
    CHECK(out && strstr(out, "ok bad key: AuthenticationError 401"), "it ran to the end");
    free(out);
    CHECK(hs_stop(&srv) == 0, "the server exits 0 on SIGTERM");
    unlink(model);
    TEST_MAIN_END();
}

/* test_server_webui.c — the chat page at / in a real browser: Debian's headless chromium, driven by npm
 * playwright-core (both installed by scripts/setup.sh), against `braid serve` on loopback with an API key and a
 * generated model (random weights: its replies run to max_tokens, so there is a long reply to stop).
 * tests/server/webui_browser.cjs does the steps (key prompt, send and watch the stream, stop, regenerate, edit,
 * reload, export, an image attached by the file input and one pasted, a phone-width pass) and writes a
 * screenshot of each into BRAID_BUILD_DIR/webui-screenshots/. The server has a random vision projector
 * (--mmproj) and the image is a PNG generated here.
 * Skipped only when this machine cannot install chromium at all (no apt candidate); a machine that could but
 * has not (setup.sh not run) fails, so the test never passes by not running. */
#include <string.h>

#include "braid.h"
#include "genmodel/gen_mmproj.h"
#include "genmodel/genmodel.h"
#include "server_harness.h"
#include "test.h"
#include "vision/image_write.h"

#define PLAYWRIGHT_VERSION "1.65.1" /* scripts/setup.sh */

int main(void) {
    const char *build = test_env("BRAID_BUILD_DIR", "."), *src = test_env("BRAID_SOURCE_DIR", "..");
    char pkg[1200], model[1100], mmproj[1100], png[1100], exe[1100], logp[1100], shots[1100], args[4000], cmd[8000];
    const char *cache = getenv("BRAID_CACHE");
    char home_cache[1024];
    snprintf(home_cache, sizeof home_cache, "%s/.cache/braid", test_env("HOME", "/root"));
    snprintf(pkg, sizeof pkg, "%s/playwright-core/%s/node_modules/playwright-core",
             cache && *cache ? cache : home_cache, PLAYWRIGHT_VERSION);
    const char *chromium = access("/usr/bin/chromium", X_OK) == 0 ? "/usr/bin/chromium" : NULL;
    if (!chromium) {
        /* installable here (an apt candidate exists) but missing: setup.sh was not run, which is a failure */
        int st = -1;
        char *pol = test_run_cmd("apt-cache policy chromium 2>/dev/null", &st);
        int installable = pol && strstr(pol, "Candidate:") && !strstr(pol, "Candidate: (none)");
        free(pol);
        if (!installable) TEST_SKIP("chromium cannot be installed on this machine (no apt candidate)");
        CHECK(0, "chromium is installable but not installed: run scripts/setup.sh");
        TEST_MAIN_END();
    }
    CHECK(access(pkg, R_OK) == 0, "playwright-core is installed (%s; scripts/setup.sh installs it)", pkg);
    CHECK(system("node --version >/dev/null 2>&1") == 0, "node is installed (scripts/setup.sh)");
    if (test_failed_) TEST_MAIN_END();

    snprintf(model, sizeof model, "%s/test_server_webui.gguf", build);
    snprintf(exe, sizeof exe, "%s/braid", build);
    snprintf(logp, sizeof logp, "%s/test_server_webui.log", build);
    snprintf(shots, sizeof shots, "%s/webui-screenshots", build);
    gen_params gp;
    gen_params_default(&gp);
    gp.type = BRAID_TYPE_Q8_0;
    gen_summary sum;
    if (gen_model_write(&gp, model, &sum) != BRAID_OK) TEST_SKIP("no vocabulary to build the model from");
    snprintf(mmproj, sizeof mmproj, "%s/test_server_webui_mm.gguf", build);
    snprintf(png, sizeof png, "%s/test_server_webui.png", build);
    gen_mmproj_params mp;
    gen_mmproj_default(&mp);
    mp.n_text = 64; /* the generated qwen35's n_embd */
    CHECK_STATUS(gen_mmproj_write(&mp, mmproj, NULL), BRAID_OK);
    CHECK(tk_png_write_pattern(png, 96, 64, TK_GRADIENT, 3), "the PNG to attach");
    snprintf(args, sizeof args, "-m '%s' --mmproj '%s' -c 4096 -t 1 --parallel 2 --api-key page-key", model, mmproj);
    hs_server srv;
    CHECK(hs_start(&srv, exe, args, logp), "the server starts");
    if (!srv.port) TEST_MAIN_END();
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s' && node '%s/tests/server/webui_browser.cjs' '%s' '%s' %d page-key '%s' '%s' 2>&1", shots,
             src, pkg, chromium, srv.port, shots, png);
    int st = -1;
    char *out = test_run_cmd(cmd, &st);
    printf("%s", out ? out : "");
    CHECK(st == 0 && out && !strstr(out, "FAIL"), "the browser's checks pass (exit %d)", st);
    CHECK(out && strstr(out, "ok phone: reloaded"), "it ran to the end");
    free(out);
    CHECK(hs_stop(&srv) == 0, "the server exits 0 on SIGTERM");
    unlink(model);
    unlink(mmproj);
    unlink(png);
    TEST_MAIN_END();
}

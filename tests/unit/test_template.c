/* test_template.c — the chat-template interpreter's own cases: Python semantics that the real-template corpus
 * (test_template_corpus.c) touches only in passing (float and string repr, tojson spacing and escapes,
 * slicing, floor division, Markup escaping, str.format, filters), and the failure paths: syntax errors with
 * line:col, unknown filters, raise_exception, bad JSON, the step / output / recursion limits, NULL arguments
 * and injected allocation failures. Expected texts are what Python Jinja2 3.1 prints for the same template
 * with Hugging Face's settings (tests/template/hf_render.py's environment). */
#include <string.h>

#include "base/alloc.h"
#include "braid.h"
#include "test.h"

static braid_status render(const char *tmpl, const char *messages, const braid_chat_params *p, char **out) {
    size_t n;
    return braid_chat_template_render(tmpl, strlen(tmpl), messages ? messages : "[]", p, out, &n);
}

static void expect(const char *tmpl, const char *want) {
    char *out = NULL;
    braid_status s = render(tmpl, NULL, NULL, &out);
    CHECK(s == BRAID_OK && strcmp(out, want) == 0, "%s\n  want: %s\n  got:  %s (%s)", tmpl, want,
          out ? out : "(none)", s == BRAID_OK ? "" : braid_last_error());
    braid_free(out);
}

static void expect_fail(const char *tmpl, const char *messages, const braid_chat_params *p, braid_status want,
                        const char *msg_part) {
    char *out = NULL;
    braid_status s = render(tmpl, messages, p, &out);
    CHECK(s == want && strstr(braid_last_error(), msg_part) != NULL && out == NULL,
          "%s: got %s '%s', want %s with '%s'", tmpl, braid_status_name(s), braid_last_error(),
          braid_status_name(want), msg_part);
    braid_free(out);
}

int main(void) {
    /* bytes that are not UTF-8 (a template need not be): counting, iterating and slicing agree on where each
     * character ends (fuzz_template found |list writing past a list sized by a different count) */
    expect("{% set s = \"\xe5\x88\x80" "a\xff\x80\x80\x80\x80\x80" "b\xe0\x80\" %}{{ (s|list|length) == (s|length) }} "
           "{{ s|list|join == s }} {{ (s[1:]|length) == (s|length) - 1 }} {{ s[::-2] == (s|list)[::-2]|join }}",
           "True True True True");
    /* values and operators, as Jinja2 prints them */
    expect("{{ {\"a\": 1.0, \"b\": 1e-7, \"c\": \"\xc3\xa9\\n\\u0001\\\"\", \"d\": [true, none], \"e\": 123456789012345678}|tojson }}",
           "{\"a\": 1.0, \"b\": 1e-07, \"c\": \"\xc3\xa9\\n\\u0001\\\"\", \"d\": [true, null], \"e\": 123456789012345678}");
    expect("{{ {\"a\":[1,2]}|tojson(indent=2) }}", "{\n  \"a\": [\n    1,\n    2\n  ]\n}");
    expect("{{ [1.5, 2.0, 1e16, 0.1+0.2, -0.0] }}|{{ {\"k\": \"it's\", \"q\": \"a\\\"b\"} }}|{{ (1,) }}|{{ none }}|{{ true }}",
           "[1.5, 2.0, 1e+16, 0.30000000000000004, -0.0]|{'k': \"it's\", 'q': 'a\"b'}|(1,)|None|True");
    expect("{{ \"  a b  c \".split() }}|{{ \"a,b,,c\".split(\",\", 1) }}|{{ \"Hello World\"[::-1] }}|{{ \"abc\"[1:] }}|{{ [1,2,3][-2:] }}",
           "['a', 'b', 'c']|['a', 'b,,c']|dlroW olleH|bc|[2, 3]");
    expect("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 7 / 2 }} {{ 1 + 1.5 }} {{ \"ab\" * 3 }}",
           "3 -4 -2 1024 3.5 2.5 ababab");
    expect("{% set x = \"<b>\"|safe %}{{ x + \"<i>\" }}|{{ \"<i>\" + x }}|{{ x ~ \"<i>\" }}", "<b>&lt;i&gt;|&lt;i&gt;<b>|<b><i>");
    expect("{{ \"{:>6}|{:<4}|{:^7}|{:05d}|{:.2f}|{!r}\".format(\"ab\", 1, \"mid\", 42, 3.14159, \"q\") }}",
           "    ab|1   |  mid  |00042|3.14|'q'");
    expect("{% for a, b in {\"x\": 1, \"y\": 2}.items() %}{{ loop.index }}{{ a }}{{ b }}{{ loop.revindex }}{% if not loop.last %},{% endif %}{% endfor %}",
           "1x12,2y21");
    expect("{{ \"  text\\n  more\\n\\nlast\"|indent(2, first=true) }}|{{ \" Mixed Case \"|trim|lower|capitalize }}|{{ \"hello world\"|title }}",
           "    text\n    more\n\n  last|Mixed case|Hello World");
    expect("{{ [3,1,2]|sort|list }}{{ [\"b\",\"A\",\"a\"]|unique|list }}{{ {\"b\":1,\"A\":2}|dictsort }}{{ [1,2,3]|sum }}{{ [1,2]|first }}{{ \"xyz\"|last }}",
           "[1, 2, 3]['b', 'A'][('A', 2), ('b', 1)]61z");
    /* whitespace control: trim_blocks, lstrip_blocks, -, + and one trailing newline dropped */
    expect("a\n  {% if true %}\n  b\n  {%- endif %}  \n{{- 'c' }}\n", "a\n  bc");
    expect("x\n    {%+ if true %}y{% endif %}", "x\n    y");

    /* failures: status, message with line:col, no output */
    expect_fail("line one\n{% if x %}never closed", NULL, NULL, BRAID_E_FORMAT, "template:");
    expect_fail("{{ x | no_such_filter }}", NULL, NULL, BRAID_E_FORMAT, "No filter named 'no_such_filter'");
    expect("{% if x %}{{ x | no_such_filter }}{% endif %}ok", "ok"); /* Jinja2 only fails if it is called */
    expect_fail("{{ raise_exception('nope: ' ~ 42) }}", NULL, NULL, BRAID_E_INVALID, "nope: 42");
    expect_fail("{{ undefined_thing.attr }}", NULL, NULL, BRAID_E_INVALID, "'undefined_thing' is undefined");
    expect_fail("{% set l = [] %}{{ l.append(1) }}", NULL, NULL, BRAID_E_INVALID, "SecurityError");
    expect_fail("{{ messages }}", "[{\"role\": \"user\",}]", NULL, BRAID_E_FORMAT, "messages: invalid JSON at 1:18");
    expect_fail("{{ messages }}", "[\"\xff\"]", NULL, BRAID_E_FORMAT, "invalid UTF-8");
    expect_fail("{{ messages }}", "[] x", NULL, BRAID_E_FORMAT, "extra data");
    expect_fail("{% set r = range(100000) %}{% for i in r %}{% for j in r %}{% endfor %}{% endfor %}", NULL, NULL,
                BRAID_E_RANGE, "steps");
    expect_fail("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", NULL, NULL, BRAID_E_RANGE, "nested");
    expect_fail("{{ range(1000000)|list }}", NULL, NULL, BRAID_E_RANGE, "MAX_RANGE");
    braid_chat_params small = braid_chat_default_params();
    small.max_output = 100;
    expect_fail("{% for i in range(50) %}abc{% endfor %}", NULL, &small, BRAID_E_RANGE, "exceed 100 bytes");
    braid_chat_params kw = braid_chat_default_params();
    kw.kwargs_json = "{\"messages\": 1}";
    expect_fail("x", NULL, &kw, BRAID_E_INVALID, "'messages' is set by braid");
    char *out = NULL;
    size_t n;
    CHECK_STATUS(braid_chat_template_render(NULL, 0, "[]", NULL, &out, &n), BRAID_E_INVALID);
    CHECK_STATUS(braid_chat_template_render("x", 1, NULL, NULL, &out, &n), BRAID_E_INVALID);

    /* the variables a template sees */
    braid_chat_params p = braid_chat_default_params();
    p.bos_token = "<s>";
    p.tools_json = "[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]";
    p.kwargs_json = "{\"enable_thinking\": false}";
    p.now = 1767225600;
    const char *vars = "{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}|{{ tools[0].function.name }}|"
                       "{{ documents }}|{{ enable_thinking }}|{{ messages[0].content }}|{{ strftime_now('%Y') }}";
    CHECK_STATUS(braid_chat_template_render(vars, strlen(vars), "[{\"role\": \"user\", \"content\": \"hi\"}]", &p, &out, &n),
                 BRAID_OK);
    CHECK(out && strcmp(out, "<s>||True|f|None|False|hi|2026") == 0, "got '%s'", out ? out : "");
    braid_free(out);

    /* every allocation of a render may fail: BRAID_E_NOMEM, nothing leaked (the sanitizer build checks) */
    const char *t = "{% for m in messages %}{{ m.role | upper }}: {{ m.content | tojson }}{% endfor %}";
    const char *msgs = "[{\"role\": \"user\", \"content\": \"hello\"}, {\"role\": \"assistant\", \"content\": \"x\"}]";
    bd_alloc_reset_count();
    out = NULL;
    CHECK_STATUS(braid_chat_template_render(t, strlen(t), msgs, NULL, &out, &n), BRAID_OK);
    braid_free(out);
    uint64_t sites = bd_alloc_count();
    int nomem_ok = 1;
    for (uint64_t k = 1; k <= sites; k++) {
        bd_alloc_fail_at(k, 0);
        out = NULL;
        braid_status s = braid_chat_template_render(t, strlen(t), msgs, NULL, &out, &n);
        bd_alloc_fail_at(0, 0);
        if (s != BRAID_E_NOMEM || out) nomem_ok = 0;
        braid_free(out);
    }
    CHECK(sites > 0 && nomem_ok, "an injected allocation failure among %llu did not give BRAID_E_NOMEM",
          (unsigned long long)sites);
    TEST_MAIN_END();
}

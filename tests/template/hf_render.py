#!/usr/bin/python3
"""hf_render.py TEMPLATE_DIR CONVERSATION_DIR OUT — renders every chat template x every conversation with
Python Jinja2 configured exactly as Hugging Face transformers does (chat_template_utils._compile_jinja_template:
ImmutableSandboxedEnvironment(trim_blocks, lstrip_blocks, loopcontrols, the {% generation %} tag), tojson with
ensure_ascii=False, raise_exception and strftime_now; render(messages, tools, documents=None,
add_generation_prompt, bos_token, eos_token, **kwargs)). This is the reference the chat-template test
(tests/unit/test_template_corpus.c) compares braid with, byte for byte.

strftime_now uses the fixed time BRAID_TEMPLATE_NOW (seconds since the epoch, local time) so that both engines
see the same date. Output, one record per rendering:
  CASE <template> <conversation> OK <n>\n<n bytes>\n     or     CASE <template> <conversation> ERR <n>\n<n bytes>\n
(the ERR bytes are the Python exception's type and message; a template that does not compile is ERR for every
conversation)."""
import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = datetime.datetime.fromtimestamp(int(os.environ.get("BRAID_TEMPLATE_NOW", "1767225600")))


class AssistantTracker(jinja2.ext.Extension):
    # Hugging Face's {% generation %} ... {% endgeneration %}: renders its body (the tracking of assistant
    # token indices it adds when asked for an assistant mask does not change the text).
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return NOW.strftime(fmt)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(template, conv):
    kwargs = dict(conv.get("kwargs", {}))
    return template.render(messages=conv["messages"], tools=conv.get("tools"), documents=None,
                           add_generation_prompt=conv.get("add_generation_prompt", True),
                           bos_token=conv.get("bos_token", ""), eos_token=conv.get("eos_token", ""), **kwargs)


def main():
    tdir, cdir, out_path = sys.argv[1:4]
    convs = []
    for name in sorted(os.listdir(cdir)):
        if name.endswith(".json"):
            with open(os.path.join(cdir, name), encoding="utf-8") as f:
                convs.append((name[:-5], json.load(f)))
    env = environment()
    with open(out_path, "wb") as out:
        for tname in sorted(os.listdir(tdir)):
            if not tname.endswith(".jinja"):
                continue
            with open(os.path.join(tdir, tname), "rb") as f:
                src = f.read().decode("utf-8")
            try:
                template, compile_error = env.from_string(src), None
            except Exception as e:  # noqa: BLE001 - any failure to compile is a refusal to report
                template, compile_error = None, e
            for cname, conv in convs:
                err = compile_error
                text = None
                if template is not None:
                    try:
                        text = render(template, conv)
                    except Exception as e:  # noqa: BLE001
                        err = e
                if err is None:
                    data, kind = text.encode("utf-8"), "OK"
                else:
                    data, kind = f"{type(err).__name__}: {err}".encode("utf-8", "replace"), "ERR"
                out.write(f"CASE {tname} {cname} {kind} {len(data)}\n".encode())
                out.write(data + b"\n")


if __name__ == "__main__":
    main()

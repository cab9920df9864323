#!/usr/bin/python3
"""Expected outputs for tests/test-chat-template.c, rendered by jinja2.

jinja2 is set up the way Hugging Face transformers renders chat templates
(transformers/utils/chat_template_utils.py): ImmutableSandboxedEnvironment
with trim_blocks and lstrip_blocks, the loopcontrols extension, a `generation`
block that renders its body, `tojson` replaced by json.dumps(ensure_ascii=False)
with indent/separators/sort_keys, and the globals raise_exception(msg) and
strftime_now(fmt) -- the latter on a fixed clock (2024-07-26 10:00:00) so the
fixtures do not change with the day.

Inputs (all under tests/fixtures/templates/):
  expressions.txt     small templates for the expression language, one case per
                      "=== name" header, the next line the context as JSON, then
                      the template up to the next header
  templates.json      chat templates: a .jinja file here or "hf:<dir>" for the
                      "chat_template" of ../shared/data/tokenizers/<dir>/tokenizer_config.json,
                      with the bos/eos tokens the family uses
  conversations.json  conversations and which templates render them
Output:
  expected.json       {"expressions": {name: {"out": s} | {"error": msg}},
                       "chats": {"template/conversation": {...}}}

Run from the repository root (needs Debian's python3-jinja2, 3.1.2):
  /usr/bin/python3 tests/reference/render_templates.py
"""
import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIX = os.path.join(ROOT, "tests", "fixtures", "templates")
DATA = os.path.join(os.path.dirname(ROOT), "shared", "data", "tokenizers")
NOW = datetime.datetime(2024, 7, 26, 10, 0, 0)


class Generation(jinja2.ext.Extension):
    """transformers' AssistantTracker without the tracking: the body renders as is."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent,
                          separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return NOW.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, source, context):
    try:
        return {"out": env.from_string(source).render(**context)}
    except Exception as e:  # the C side only checks that it fails, and raise_exception's text
        return {"error": str(e), "kind": type(e).__name__}


def read_expressions(path):
    cases = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        if not lines[i].startswith("=== "):
            i += 1
            continue
        name = lines[i][4:].strip()
        ctx = json.loads(lines[i + 1])
        j = i + 2
        while j < len(lines) and not lines[j].startswith("=== "):
            j += 1
        body = lines[i + 2:j]
        # The newline before the next header is not part of the template.
        cases.append((name, ctx, "\n".join(body)))
        i = j
    return cases


def token(v):
    if isinstance(v, dict):
        return v.get("content")
    return v


def load_template(spec):
    src = spec["source"]
    if src.startswith("hf:"):
        with open(os.path.join(DATA, src[3:], "tokenizer_config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
        return cfg["chat_template"]
    with open(os.path.join(FIX, src), encoding="utf-8") as f:
        return f.read()


def main():
    env = make_env()
    out = {"expressions": {}, "chats": {}}
    for name, ctx, src in read_expressions(os.path.join(FIX, "expressions.txt")):
        if name in out["expressions"]:
            sys.exit("duplicate expression case " + name)
        out["expressions"][name] = render(env, src, ctx)

    with open(os.path.join(FIX, "templates.json"), encoding="utf-8") as f:
        templates = json.load(f)
    with open(os.path.join(FIX, "conversations.json"), encoding="utf-8") as f:
        conversations = json.load(f)
    for conv in conversations:
        for tname in conv["templates"]:
            spec = templates[tname]
            # What apply_chat_template passes: tools=None and documents=None when absent.
            ctx = dict(conv.get("vars", {}))
            ctx.update(messages=conv["messages"], tools=conv.get("tools"), documents=None,
                       add_generation_prompt=conv.get("add_generation_prompt", False))
            for key in ("bos_token", "eos_token"):
                if spec.get(key) is not None:
                    ctx[key] = spec[key]
            out["chats"][tname + "/" + conv["name"]] = render(env, load_template(spec), ctx)

    with open(os.path.join(FIX, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1, sort_keys=True)
        f.write("\n")
    print("jinja2", jinja2.__version__, "->", os.path.join(FIX, "expected.json"))


if __name__ == "__main__":
    main()

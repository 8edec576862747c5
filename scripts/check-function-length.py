#!/usr/bin/env python3
"""No function is too long to read: Lua over 100 lines, C++ over 120 lines.

Scans the Lua files of stdlib/, recipes/ and scripts/ and the C++ files (.cpp/.hpp/.h/.cc/.cu) of
engine/ and bindings/; a folder named tests or test is skipped. Exit 1 naming each function over
its limit as path:line: name (N lines). A function's length counts its first and its last line:
Lua from the line of the `function` keyword to the line of its `end`; C++ from the first line of
its declaration (return type included) to the line of its closing brace.

The heuristic, not a parser:
- Lua: comments, strings and long brackets ([[ ]], [==[ ]==]) are skipped; `function`, `do`,
  `if` and `repeat` open a block and `end`/`until` close it (`then`, `while` and `for` do not
  count: an if's `then` belongs to its `if`, a loop's `do` is the block). Nested functions are
  measured too, and each counts inside the one around it.
- C++: comments, string/char literals (raw strings too) and preprocessor lines are skipped. Outside
  a function, a `{` is a function body when its declaration has a parenthesised parameter list and
  the brace follows `)`, a qualifier (const, noexcept, override, final, mutable, &, &&), a
  trailing return type, or the last member of a constructor's initialiser list; a `{` after an
  identifier or `=` there is a brace initialiser, one after namespace/class/struct/union/enum/
  extern is a scope whose members are scanned in turn. Everything inside a body (lambdas, local
  classes) belongs to that body.

scripts/function-length-allow.txt names functions (path:name) allowed over the limit for now; an
entry whose function is no longer over the limit (or is gone) is an error too, so the list only
shrinks.

--self-test runs the heuristic on small sources written for it (too long, just short enough,
keywords and braces hidden in strings and comments) and exits 1 when any verdict is wrong.
"""
import os
import re
import sys
import tempfile

LUA_LIMIT = 100
CPP_LIMIT = 120
LUA_DIRS = ["stdlib", "recipes", "scripts"]
CPP_DIRS = ["engine", "bindings"]
CPP_EXT = (".cpp", ".hpp", ".h", ".cc", ".cu", ".cuh")
SKIP_DIRS = {"tests", "test", "build", ".git"}
ALLOW_FILE = os.path.join("scripts", "function-length-allow.txt")


# ---------------------------------------------------------------------------------------- Lua

LUA_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
LUA_LONG_OPEN = re.compile(r"\[(=*)\[")


def past(text, close, start):
    """The index just past the first `close` at or after start, or the end of text."""
    j = text.find(close, start)
    return len(text) if j < 0 else j + len(close)


def quote_end(text, i):
    """The index of the quote closing the literal whose opening quote is text[i] (a backslash
    escapes the next character); an unclosed one ends at its line's end or the end of text."""
    c, j, n = text[i], i + 1, len(text)
    while j < n and text[j] != c and text[j] != "\n":
        j += 2 if text[j] == "\\" else 1
    return j


def lua_tokens(text):
    """Yields (word or punctuation, line) with comments and strings left out."""
    i, line, n = 0, 1, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif text.startswith("--", i):
            m = LUA_LONG_OPEN.match(text, i + 2)
            if m:
                j = past(text, "]" + m.group(1) + "]", m.end())
            else:
                j = text.find("\n", i)
                j = n if j < 0 else j
            line += text.count("\n", i, j)
            i = j
        elif c == "[" and LUA_LONG_OPEN.match(text, i):
            m = LUA_LONG_OPEN.match(text, i)
            j = past(text, "]" + m.group(1) + "]", m.end())
            line += text.count("\n", i, j)
            i = j
        elif c in "\"'":
            j = quote_end(text, i)
            line += text.count("\n", i, min(j + 1, n))
            i = j + 1
        elif c.isalpha() or c == "_":
            m = LUA_WORD.match(text, i)
            yield m.group(0), line
            i = m.end()
        else:
            yield c, line
            i += 1


def lua_functions(text):
    """[(name, first line, last line)] of every function in a Lua source."""
    toks = list(lua_tokens(text))
    stack, found = [], []
    for k, (tok, line) in enumerate(toks):
        if tok == "function":
            stack.append(("function", line, lua_name(toks, k)))
        elif tok in ("do", "if", "repeat"):
            stack.append((tok, line, None))
        elif tok in ("end", "until") and stack:
            kind, first, name = stack.pop()
            if kind == "function":
                found.append((name, first, line))
    return found


def lua_name(toks, k):
    """`function a.b:c(`, `local function f(`, `f = function(`, `f = function(` in a table."""
    name = []
    j = k + 1
    while j < len(toks) and (LUA_WORD.fullmatch(toks[j][0]) or toks[j][0] in ".:"):
        name.append(toks[j][0])
        j += 1
    if name:
        return "".join(name)
    if k >= 2 and toks[k - 1][0] == "=" and LUA_WORD.fullmatch(toks[k - 2][0]):
        j = k - 2
        while j >= 2 and toks[j - 1][0] in ".:" and LUA_WORD.fullmatch(toks[j - 2][0]):
            j -= 2
        return "".join(t for t, _ in toks[j:k - 1])
    return "<anonymous>"


# ---------------------------------------------------------------------------------------- C++

CPP_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
CPP_NUMBER = re.compile(r"[0-9](?:[0-9A-Za-z_.]|'(?=[0-9A-Za-z])|[eEpP][+-])*")
RAW_STRING = re.compile(r'(?:u8|u|U|L)?R"([^()\\ ]{0,16})\(')
QUALIFIERS = {"const", "noexcept", "override", "final", "mutable", "&", "&&", "volatile", "try"}
SCOPES = {"namespace", "class", "struct", "union", "enum", "extern"}
NOT_NAMES = {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "alignof",
             "noexcept", "static_assert", "requires", "throw"}


def cpp_tokens(text):
    """Yields (token, line): identifiers, numbers, "STR" for literals, punctuation (:: -> && kept
    whole); comments and preprocessor lines left out."""
    i, line, n = 0, 1, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
            at_line_start = True
            continue
        if c.isspace():
            i += 1
            continue
        if c == "#" and at_line_start:
            j = i
            while True:
                e = text.find("\n", j)
                if e < 0:
                    e = n
                    break
                if text[e - 1] == "\\":
                    j = e + 1
                    continue
                break
            line += text.count("\n", i, e)
            i = e
            continue
        at_line_start = False
        if text.startswith("//", i):
            e = text.find("\n", i)
            i = n if e < 0 else e
        elif text.startswith("/*", i):
            e = past(text, "*/", i + 2)
            line += text.count("\n", i, e)
            i = e
        elif RAW_STRING.match(text, i):
            m = RAW_STRING.match(text, i)
            e = past(text, ")" + m.group(1) + '"', m.end())
            yield "STR", line
            line += text.count("\n", i, e)
            i = e
        elif c in "\"'":
            j = quote_end(text, i)
            yield "STR", line
            i = j + 1
        elif c.isdigit():
            i = CPP_NUMBER.match(text, i).end()
            yield "NUM", line
        elif c.isalpha() or c == "_":
            m = CPP_IDENT.match(text, i)
            # an encoding prefix glued to a literal (L"x", u8'c') is part of the literal
            if m.group(0) in ("L", "u", "U", "u8") and m.end() < n and text[m.end()] in "\"'":
                i = m.end()
                continue
            yield m.group(0), line
            i = m.end()
        else:
            two = text[i:i + 2]
            if two in ("::", "->", "&&", "||", "<<", ">>", "==", "!=", "<=", ">="):
                yield two, line
                i += 2
            else:
                yield c, line
                i += 1


def matching(toks, k, open_, close):
    """Index of the token closing the bracket opened at k."""
    depth = 0
    for j in range(k, len(toks)):
        if toks[j][0] == open_:
            depth += 1
        elif toks[j][0] == close:
            depth -= 1
            if depth == 0:
                return j
    return len(toks) - 1


def cpp_signature(stmt):
    """(name, is_function, in_init_list) of the declaration whose tokens are stmt."""
    depth, name, after_params, init_list = 0, None, False, False
    for j, (tok, _) in enumerate(stmt):
        if tok == "(":
            if depth == 0 and name is None:
                prev = stmt[j - 1][0] if j else ""
                if prev == "operator":  # operator()(...)
                    name = qualified(stmt, j - 1, "operator()")
                elif j >= 2 and stmt[j - 2][0] == "operator":  # operator==(...)
                    name = qualified(stmt, j - 2, "operator" + prev)
                elif CPP_IDENT.fullmatch(prev) and prev not in NOT_NAMES:
                    name = qualified(stmt, j - 1, prev)
                else:  # a lambda, a cast, a control statement: not a declaration
                    return None, False, False
            depth += 1
        elif tok == ")":
            depth -= 1
            if depth == 0 and name is not None:
                after_params = True
        elif tok == ":" and depth == 0 and after_params:
            init_list = True
    return name, name is not None and after_params, init_list


def qualified(stmt, j, last):
    """A::B::name ending at stmt[j]."""
    parts = [last]
    while j >= 2 and stmt[j - 1][0] == "::" and CPP_IDENT.fullmatch(stmt[j - 2][0]):
        parts.insert(0, stmt[j - 2][0])
        j -= 2
    if j >= 1 and stmt[j - 1][0] == "~":
        parts[0] = "~" + parts[0]
    return "::".join(parts)


def cpp_functions(text):
    """[(name, first line, last line)] of every function body in a C++ source."""
    toks = list(cpp_tokens(text))
    found, scopes = [], []  # scopes: [(closing index, class name or None)]
    stmt_start, k = 0, 0
    while k < len(toks):
        tok = toks[k][0]
        while scopes and k > scopes[-1][0]:
            scopes.pop()
        if tok in (";", "}"):
            stmt_start = k + 1
        elif tok == "{":
            stmt = toks[stmt_start:k]
            words = {t for t, _ in stmt}
            close = matching(toks, k, "{", "}")
            prev = stmt[-1][0] if stmt else ""
            if words & SCOPES and "(" not in words:
                scopes.append((close, class_name(stmt)))
                stmt_start = k + 1
                k += 1
                continue
            name, is_function, init_list = cpp_signature(stmt)
            body = is_function and prev != "=" and (
                prev == ")" or prev in QUALIFIERS or "->" in words or (init_list and prev == "}"))
            if body and init_list and CPP_IDENT.fullmatch(prev) and prev not in QUALIFIERS:
                body = False  # a member's brace initialiser: `: a_(x), b_{y} {`
            if body:
                owner = next((c for _, c in reversed(scopes) if c), None)
                if owner and "::" not in name:
                    name = owner + "::" + name
                found.append((name, stmt[0][1] if stmt else toks[k][1], toks[close][1]))
                stmt_start = close + 1
                k = close + 1
                continue
            # a brace initialiser or an aggregate: skip it, the statement goes on
            k = close + 1
            continue
        elif tok == ":" and k > 0 and toks[k - 1][0] in ("public", "private", "protected"):
            stmt_start = k + 1
        k += 1
    return found


def class_name(stmt):
    for j, (tok, _) in enumerate(stmt):
        if tok in ("class", "struct", "union") and j + 1 < len(stmt):
            nxt = stmt[j + 1][0]
            if CPP_IDENT.fullmatch(nxt) and nxt not in ("alignas", "final"):
                return nxt
    return None


# ---------------------------------------------------------------------------------------- run

def source_files(root, dirs, exts):
    for d in dirs:
        for base, subdirs, files in os.walk(os.path.join(root, d)):
            subdirs[:] = sorted(s for s in subdirs if s not in SKIP_DIRS)
            for f in sorted(files):
                if f.endswith(exts):
                    yield os.path.relpath(os.path.join(base, f), root)


def too_long(root, files, measure, limit):
    out = []
    for path in files:
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for name, first, last in measure(text):
            if last - first + 1 > limit:
                out.append((path, name, first, last - first + 1))
    return out


def read_allow(root):
    allow = set()
    path = os.path.join(root, ALLOW_FILE)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                if line:
                    allow.add(line)
    return allow


def check(root):
    lua = too_long(root, source_files(root, LUA_DIRS, (".lua",)), lua_functions, LUA_LIMIT)
    cpp = too_long(root, source_files(root, CPP_DIRS, CPP_EXT), cpp_functions, CPP_LIMIT)
    allow = read_allow(root)
    errors, seen = [], set()
    for lang, found, limit in (("Lua", lua, LUA_LIMIT), ("C++", cpp, CPP_LIMIT)):
        for path, name, line, n in found:
            key = "%s:%s" % (path, name)
            seen.add(key)
            if key in allow:
                print("allowed for now (%s): %s:%d: %s, %d lines" % (ALLOW_FILE, path, line, name, n))
            else:
                errors.append("%s:%d: %s function %s is %d lines (limit %d)" % (path, line, lang, name, n, limit))
    for key in sorted(allow - seen):
        errors.append("%s: %s is no longer over its limit (or is gone): remove it from the list" %
                      (ALLOW_FILE, key))
    for e in errors:
        print(e)
    if errors:
        print("check-function-length: %d problem(s); split a long function into named helpers" % len(errors))
        return 1
    print("check-function-length: no Lua function over %d lines, no C++ function over %d, beyond %s" %
          (LUA_LIMIT, CPP_LIMIT, ALLOW_FILE))
    return 0


def self_test():
    """The verdicts on small sources written to fool a careless matcher."""
    def lua_fn(name, body_lines):
        filler = ["  local s = 'end' .. \"function\" -- end end do if",
                  "  if x then y() elseif z then w() else v() end",
                  "  for i = 1, 2 do while false do end end",
                  "  repeat i = i + 1 until i > 3",
                  "  local t = [[ end function ]] --[==[ end ]==]"]
        lines = ["local function %s(x)" % name, "  --[[ end", "  end ]] local u = [=[ do", "  ]=]"]
        while len(lines) < body_lines - 1:
            lines.append(filler[len(lines) % len(filler)])
        return "\n".join(lines[:body_lines - 1] + ["end"])

    def cpp_fn(sig, body_lines):
        lines = [sig + " {", "  /* {", "  } */"]
        filler = ['  const char* s = "}{"; // } {', "  if (x) { y(); } /* { */", "  char c = '}'; // }",
                  '  auto r = R"x(})x"; int n = 1\'000;']
        while len(lines) < body_lines - 1:
            lines.append(filler[len(lines) % len(filler)])
        return "\n".join(lines[:body_lines - 1] + ["}"])

    cases = [
        ("lua", lua_fn("long", LUA_LIMIT + 1), [("long", LUA_LIMIT + 1)]),
        ("lua", lua_fn("fits", LUA_LIMIT), []),
        ("lua", "M.run = function(a)\n" + "\n".join(["  x()"] * 120) + "\nend\nreturn M", [("M.run", 122)]),
        ("cpp", "namespace cs {\nclass Relay {\n public:\n" + cpp_fn("  void loop()", CPP_LIMIT + 1) + "\n};\n}",
         [("Relay::loop", CPP_LIMIT + 1)]),
        ("cpp", "namespace {\nint v{3};\n}\n" + cpp_fn("int Coordinator::pump(int x) const", CPP_LIMIT), []),
        ("cpp", "Foo::Foo(int a)\n    : a_(a), b_{a} " + cpp_fn("", CPP_LIMIT + 3)[1:] + "\n",
         [("Foo::Foo", CPP_LIMIT + 4)]),
        ("cpp", 'extern "C" {\n' + cpp_fn("auto f() -> int", CPP_LIMIT + 2) + "\n}", [("f", CPP_LIMIT + 2)]),
    ]
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for no, (lang, src, want) in enumerate(cases):
            measure, limit = (lua_functions, LUA_LIMIT) if lang == "lua" else (cpp_functions, CPP_LIMIT)
            path = os.path.join(tmp, "case%d.%s" % (no, lang))
            with open(path, "w", encoding="utf-8") as f:
                f.write(src)
            got = [(name, n) for _, name, _, n in too_long(tmp, [os.path.basename(path)], measure, limit)]
            if got != want:
                failed += 1
                print("self-test case %d (%s): want %s, got %s" % (no, lang, want, got))
    print("check-function-length --self-test: %d of %d cases wrong" % (failed, len(cases)))
    return 1 if failed else 0


def main(argv):
    if "--self-test" in argv:
        return self_test()
    args = [a for a in argv if not a.startswith("--")]
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), ".."))
    return check(root)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

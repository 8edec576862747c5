#!/usr/bin/env python3
"""C++ functions longer than LIMIT lines, longest first (issue 24: none over 120 outside tests).

Usage: scripts/function-lengths.py [LIMIT] [PATH...]   (default: 120 engine bindings)

A function runs from the first line of its signature to its closing brace. Comments, strings and
preprocessor lines are blanked first, then braces are matched: a brace that follows a ')' at
namespace or class scope opens a function (lambdas and blocks inside it count towards it).
Exit status 1 when any function is longer than LIMIT.
"""
import pathlib
import re
import sys

CTRL = re.compile(r'\b(if|for|while|switch|catch|do|else|try)\s*$')


def strip(src):
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith('//', i):
            j = src.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            i = j
        elif src.startswith('/*', i):
            j = src.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', src[i:j]))
            i = j
        elif src.startswith('R"', i) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == '_')):
            m = re.match(r'R"([^(]*)\(', src[i:])
            j = src.find(')' + m.group(1) + '"', i) + len(m.group(1)) + 2
            out.append('""' + re.sub(r'[^\n]', ' ', src[i + 2:j]))
            i = j
        elif c in '"\'':
            if c == "'" and i > 0 and src[i - 1].isalnum():  # a digit separator: 1'000
                out.append(' ')
                i += 1
                continue
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == '\\' else 1
            out.append(c + ' ' * (j - i - 1) + c)
            i = j + 1
        elif c == '#' and src[:i].rsplit('\n', 1)[-1].strip() == '':
            j = i
            while True:
                k = src.find('\n', j)
                k = n if k < 0 else k
                if k > 0 and src[k - 1] == '\\':
                    j = k + 1
                    continue
                break
            out.append(re.sub(r'[^\n]', ' ', src[i:k]))
            i = k
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def functions(path):
    s = strip(path.read_text())
    stack, last = [], 0
    for i, c in enumerate(s):
        if c == '{':
            if any(k[0] == 'fn' for k in stack):
                stack.append(('block',))
            else:
                head = s[last:i]
                h = head.strip()
                if re.search(r'\b(namespace|class|struct|union|enum)\b[^()]*$', h) or re.search(r'extern\s*"', h):
                    stack.append(('ns',))
                elif ')' in h and not CTRL.search(h.split(')')[0]):
                    names = re.findall(r'([~\w:<>]+)\s*\(', h)
                    start = last + (len(head) - len(head.lstrip()))
                    stack.append(('fn', names[0] if names else '?', s.count('\n', 0, start) + 1))
                else:
                    stack.append(('block',))
            last = i + 1
        elif c == '}':
            top = stack.pop() if stack else ('?',)
            if top[0] == 'fn':
                yield s.count('\n', 0, i) + 1 - top[2] + 1, top[2], top[1]
            last = i + 1
        elif c == ';':
            last = i + 1


def main(argv):
    limit = int(argv[1]) if len(argv) > 1 else 120
    roots = argv[2:] or ['engine', 'bindings']
    long = []
    for root in roots:
        r = pathlib.Path(root)
        for p in [r] if r.is_file() else sorted(r.rglob('*')):
            if p.suffix in ('.cpp', '.hpp', '.h', '.cc', '.cu') and p.is_file():
                long += [(n, f'{p}:{line}', name) for n, line, name in functions(p) if n > limit]
    for n, where, name in sorted(long, reverse=True):
        print(f'{n:5d}  {where}  {name}')
    return 1 if long else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))

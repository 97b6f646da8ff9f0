#!/usr/bin/env python3
"""The longest functions (lines from `fn` to its closing brace) in the
non-test code of the .rs files under DIR (default actors/src/session), as
issue 42 asks that none there be over 60. Skips model_test.rs,
test_support.rs and each file's `#[cfg(test)] mod ... {` to its end.
Usage: benches/scripts/fn_lengths.py [DIR]   (TOP=N rows, default 8)"""
import os, re, sys
d = sys.argv[1] if len(sys.argv) > 1 else "actors/src/session"
skip = {"model_test.rs", "test_support.rs"}
fn_re = re.compile(r'^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+(\w+)')
out = []
for root, _, files in os.walk(d):
    for f in files:
        if not f.endswith(".rs") or f in skip: continue
        p = os.path.join(root, f)
        lines = open(p).read().split("\n")
        end = len(lines)
        for i, l in enumerate(lines):
            if l.strip() == "#[cfg(test)]" and i + 1 < len(lines) and re.match(r'^mod \w+ \{', lines[i+1]):
                end = i; break
        i = 0
        while i < end:
            m = fn_re.match(lines[i])
            if m:
                depth = 0; started = False; j = i
                while j < end:
                    s = re.sub(r'"([^"\\]|\\.)*"', '""', lines[j]); s = re.sub(r"'.'", "''", s); s = s.split("//")[0]
                    for c in s:
                        if c == '{': depth += 1; started = True
                        elif c == '}': depth -= 1
                    if started and depth == 0: break
                    if not started and s.rstrip().endswith(";"): break
                    j += 1
                if started: out.append((j - i + 1, p, m.group(6)))
            i += 1
out.sort(reverse=True)
for n, p, name in out[:int(os.environ.get("TOP", "8"))]:
    print(f"{n:5d} {p} {name}")

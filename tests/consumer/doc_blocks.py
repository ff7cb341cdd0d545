#!/usr/bin/env python3
"""Compile every C++ code block of the documentation against an installed Canopy.

Blocks come from README.md and docs/*.md (```cpp fences) and from the
installed headers (PREFIX/include/canopy/**/*.hpp): the usage block at the top
of a header, i.e. the lines indented "//   " that follow the header's title
paragraph and its "//" blank line, up to the first plain "// text" line.

What a block is compiled as is said by an annotation: in markdown an HTML
comment on the line before the fence, in a header a "// compile: ..." line
just before the usage block. Further examples in a header's comments are
compiled when a "// compile: MODE" line comes right before their "//   "
lines.

  <!-- compile: program -->   a whole translation unit: built, linked, and run
                              (bounded by a timeout) when it has a main; the
                              default for a ```cpp block with no annotation
  <!-- compile: fragment -->  the default for a header's usage block. Its
                              includes go first, then every installed public
                              header and doc_prelude.hpp (the free names
                              fragments use: pool, stream, buffer, work(i),
                              ...); its top-level definitions (a line at
                              column 0 opening a function with its "{", a
                              struct, class, template, using or namespace)
                              go to namespace scope, every other line into
                              the body of a canopy::task<void>. A "..."
                              standing alone is elided code.
  <!-- compile: file -->      as fragment, but the whole block at namespace
                              scope (declarations that later ones use)
  <!-- compile: skip REASON --> not C++ (pseudo-code, a diagram, a synopsis
                              of forms): not compiled; the reason is printed

Fragments are checked with -fsyntax-only, all in one translation unit (each
in a namespace of its own); an error (or the "required from here" of one in
a header) is blamed on the block whose lines it names, and an error no block
owns fails them all. Blocks that name fibers need the canopy-fiber package;
without it they are skipped with that reason. The test fails if a block does
not compile, a program exits non-zero or past its timeout, a skip gives no
reason or an annotation is unknown. Last line:
"docs: N compiled, R ran, S skipped, F failed (of B blocks)".
"""
import argparse
import concurrent.futures
import glob
import os
import re
import subprocess
import sys
import tempfile

ANNOTATION_MD = re.compile(r"^\s*<!--\s*compile:\s*(.*?)\s*-->\s*$")
ANNOTATION_HPP = re.compile(r"^//\s*compile:\s*(.*?)\s*$")
FENCE = re.compile(r"^(\s*)```\s*(\S*)\s*$")
DEFINITION = re.compile(
    r"^(template\b|struct\b|class\b|union\b|enum\b|using\b|namespace\b"
    r"|[\w:<>,*& ]+[\s*&]+[\w:~]+\([^;=]*\)\s*(const\s*)?(noexcept\s*)?(->[^;{]*)?\{)")
ELLIPSIS = re.compile(r"(^|(?<=[\s{;]))(?<!/\* )\.\.\.(?!\s*\*/)(?=\s|}|$)")


class Block:
    def __init__(self, where, code, mode):
        self.where = where
        self.code = code
        words = mode.split(None, 1)
        self.mode = words[0] if words else ""
        self.reason = words[1] if len(words) > 1 else ""
        self.annotated = "(no annotation)" not in mode
        if self.mode.startswith("skip"):
            self.reason = (mode[4:].lstrip(": ").strip()) or ""
            self.mode = "skip"


def markdown_blocks(path, shown):
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks = []
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        indent, language = fence.group(1), fence.group(2)
        end = i + 1
        while end < len(lines) and not re.match(r"^\s*```\s*$", lines[end]):
            end += 1
        if language in ("cpp", "c++", "cxx"):
            mode = "program (no annotation)"
            back = i - 1
            while back >= 0 and not lines[back].strip():
                back -= 1
            annotation = ANNOTATION_MD.match(lines[back]) if back >= 0 else None
            if annotation:
                mode = annotation.group(1)
            code = [l[len(indent):] if l.startswith(indent) else l.lstrip() for l in lines[i + 1:end]]
            blocks.append(Block(f"{shown}:{i + 1}", "\n".join(code), mode))
        i = end + 1
    return blocks


def indented_block(lines, i):
    """The example from lines[i] on: "//" lines indented at least as far as
    the first (at least three spaces; blank "//" lines inside kept), dedented."""
    first = re.match(r"^//( {3,})\S", lines[i]) if i < len(lines) else None
    if not first:
        return [], i
    indent = "//" + first.group(1)
    code = []
    while i < len(lines) and (lines[i].startswith(indent) or lines[i] == "//"):
        code.append(lines[i][len(indent):] if lines[i] != "//" else "")
        i += 1
    while code and not code[-1].strip():
        code.pop()
    return code, i


def header_blocks(path, shown):
    lines = open(path, encoding="utf-8").read().split("\n")
    lead = []
    for line in lines:
        if not line.startswith("//"):
            break
        lead.append(line)
    blocks = []
    taken = set()
    if "//" in lead:
        i = lead.index("//") + 1
        mode = "fragment"
        if i < len(lead) and ANNOTATION_HPP.match(lead[i]):
            mode = ANNOTATION_HPP.match(lead[i]).group(1)
            taken.add(i)
            i += 1
        code, _ = indented_block(lead, i)
        if code:
            blocks.append(Block(f"{shown}:{i + 1}", "\n".join(code), mode))
    # Further examples anywhere in the header: a "// compile: MODE" line,
    # then the "//   " lines of the example.
    for i, line in enumerate(lines):
        annotation = ANNOTATION_HPP.match(line)
        if annotation and i not in taken:
            code, _ = indented_block(lines, i + 1)
            blocks.append(Block(f"{shown}:{i + 2}", "\n".join(code), annotation.group(1)))
    return blocks


def split_fragment(code, whole_file):
    """(includes, namespace-scope text, task-body text) of a fragment."""
    code = ELLIPSIS.sub("/* ... */", code)
    includes, outside, inside = [], [], []
    lines = code.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#include"):
            includes.append(line)
            i += 1
            continue
        if whole_file or (not line[:1].isspace() and DEFINITION.match(line)):
            # a definition: up to the line where its braces close (or its ';')
            depth = 0
            j = i
            while j < len(lines):
                text = re.sub(r"//.*", "", lines[j])
                depth += text.count("{") - text.count("}")
                if depth <= 0 and (text.rstrip().endswith(("}", ";")) or whole_file):
                    break
                j += 1
            outside.extend(lines[i:j + 1])
            i = j + 1
        else:
            inside.append(line)
            i += 1
    return includes, "\n".join(outside), "\n".join(inside)


def fragment_unit(blocks, prelude, public_headers):
    """The translation unit of BLOCKS, and the line range of each in it."""
    includes, bodies = [], []
    for n, block in enumerate(blocks):
        inc, outside, inside = split_fragment(block.code, block.mode == "file")
        includes.extend(inc)
        bodies.append(f"// {block.where}\nnamespace doc_block_{n} {{\n"
                      f"{outside}\n"
                      f"[[maybe_unused]] canopy::task<void> doc_fragment() {{\n{inside}\n  co_return;\n}}\n}}")
    head = "\n".join(includes + [f"#include <{h}>" for h in public_headers]) + f'\n#include "{prelude}"\n'
    line = head.count("\n") + 1
    ranges = []
    for body in bodies:
        count = body.count("\n") + 1
        ranges.append((line, line + count - 1))
        line += count
    return head + "\n".join(bodies) + "\n", ranges


def run(command, timeout=300):
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        return done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as timeout_error:
        return 124, f"timed out after {timeout} s: {timeout_error}"


def first_errors(text, count=6):
    errors = [l for l in text.split("\n") if "error" in l]
    return "\n".join(errors[:count]) or text[-1500:]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True, help="the source tree (README.md, docs/)")
    parser.add_argument("--prefix", required=True, help="where Canopy was installed")
    parser.add_argument("--flags", required=True, help="compile and link flags (pkg-config canopy)")
    parser.add_argument("--fiber-flags", default="", help="pkg-config canopy-fiber, empty: no fibers")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--work", default=None, help="keep the sources here (default: a temporary folder)")
    parser.add_argument("--verbose", action="store_true", help="name every block compiled, not only failures")
    args = parser.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    prelude = os.path.join(here, "doc_prelude.hpp")
    scratch = None if args.work else tempfile.TemporaryDirectory(prefix="canopy_docs.")
    work = args.work or scratch.name
    compiler = ["ccache", "g++"] if subprocess.run(["which", "ccache"], capture_output=True).returncode == 0 else ["g++"]
    cxx = compiler + ["-std=c++20", "-Wall", "-Wno-unused-variable", "-Wno-unused-but-set-variable"]

    blocks = []
    for path in [os.path.join(args.root, "README.md")] + sorted(glob.glob(os.path.join(args.root, "docs", "*.md"))):
        blocks.extend(markdown_blocks(path, os.path.relpath(path, args.root)))
    include_root = os.path.join(args.prefix, "include")
    for path in sorted(glob.glob(os.path.join(include_root, "canopy", "**", "*.hpp"), recursive=True)):
        # named by its path in the source tree (include/canopy/detail/ links
        # to the implementation folders)
        blocks.extend(header_blocks(path, os.path.join("include", os.path.relpath(path, include_root))))

    # Every public header (all but detail/), so that a new one's fragments
    # find its names without a change here.
    public_headers = sorted(
        os.path.relpath(path, include_root)
        for path in glob.glob(os.path.join(include_root, "canopy", "**", "*.hpp"), recursive=True)
        if os.sep + "detail" + os.sep not in path)
    compiled = ran = skipped = failed = 0

    def report(ok, block, what, detail=""):
        if not ok:
            print(f"-- docs ({block.where}) FAILED: {what}\n{detail}", file=sys.stderr)
        elif args.verbose:
            print(f"   docs ({block.where}): {what}", file=sys.stderr)

    fibers = bool(args.fiber_flags.strip())
    flags = (args.fiber_flags if fibers else args.flags).split()
    to_compile = []
    for block in blocks:
        if not block.code.strip():
            report(False, block, "an annotation with no example after it")
            failed += 1
        elif block.mode == "skip":
            if not block.reason:
                report(False, block, "'compile: skip' needs a reason")
                failed += 1
            else:
                print(f"   docs ({block.where}): skipped: {block.reason}", file=sys.stderr)
                skipped += 1
        elif block.mode not in ("program", "fragment", "file"):
            report(False, block, f"unknown annotation 'compile: {block.mode}'")
            failed += 1
        elif not fibers and re.search(r"\bfiber\b|this_fiber", block.code):
            print(f"   docs ({block.where}): skipped: the install has no fibers", file=sys.stderr)
            skipped += 1
        else:
            to_compile.append(block)

    programs = [b for b in to_compile if b.mode == "program"]
    fragments = [b for b in to_compile if b.mode != "program"]

    def build_program(n, block):
        source = os.path.join(work, f"program_{n}.cpp")
        binary = os.path.join(work, f"program_{n}")
        with open(source, "w") as out:
            out.write(block.code + "\n")
        has_main = re.search(r"^\s*int\s+main\s*\(", block.code, re.M)
        rc, text = run(cxx + [source] + (flags + ["-o", binary] if has_main else ["-c", "-o", binary + ".o"] + flags))
        if rc != 0:
            hint = "" if block.annotated else (
                " (a block with no annotation is a whole program; a fragment needs"
                " <!-- compile: fragment --> before its fence, see tests/consumer/doc_blocks.py)")
            return block, False, "did not compile" + hint, first_errors(text), False
        if not has_main:
            return block, True, "compiled (no main: not linked)", "", False
        rc, text = run([binary], timeout=30)
        if rc != 0:
            return block, False, f"ran and exited {rc}", text[-1500:], True
        return block, True, "compiled and ran", "", True

    def check_fragments(group, name):
        source = os.path.join(work, f"{name}.cpp")
        text, ranges = fragment_unit(group, prelude, public_headers)
        with open(source, "w") as out:
            out.write(text)
        rc, output = run(cxx + ["-fsyntax-only", source] + flags)
        if rc == 0:
            return [(b, True, "compiled (fragment)", "", False) for b in group]
        # Each diagnostic that points into the unit (an error, or the
        # "required from here" of one deep in a header) blames the block
        # whose lines it names; an error no block owns blames them all.
        blamed = {}
        unit = text.split("\n")
        for message in output.split("\n"):
            at = re.match(re.escape(source) + r":(\d+):\d+:\s+(error|required from)", message)
            if at:
                where = int(at.group(1))
                for n, (first, last) in enumerate(ranges):
                    if first <= where <= last:
                        # the unit is gone once the test ends: show its line
                        blamed.setdefault(n, []).append(f"{message}\n      | {unit[where - 1].strip()}")
        if not blamed:
            return [(b, False, "did not compile", first_errors(output), False) for b in group]
        return [(b, n not in blamed, "compiled (fragment)" if n not in blamed else "did not compile",
                 "\n".join(blamed.get(n, [])[:6]), False) for n, b in enumerate(group)]

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        batch = pool.submit(check_fragments, fragments, "fragments") if fragments else None
        program_results = [pool.submit(build_program, n, b) for n, b in enumerate(programs)]
        results = [r.result() for r in program_results]
        if batch is not None:
            results.extend(batch.result())
    for block, ok, what, detail, did_run in results:
        report(ok, block, what, detail)
        if ok:
            compiled += 1
            ran += did_run
        else:
            failed += 1
    print(f"docs: {compiled} compiled, {ran} ran, {skipped} skipped, {failed} failed "
          f"(of {len(blocks)} blocks)")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

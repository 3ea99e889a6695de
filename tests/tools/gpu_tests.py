#!/usr/bin/env python3
"""The GPU tests, known by their fixtures.

Every test that touches a CUDA device derives its fixture from one of the GPU fixtures:
testing::GpuTest (skips without a GPU), testing::CudaTest (also holds a context for cuda:0),
testing::DeviceTest (parameterised over the CPU and cuda:0; tests/unit/devices.h), or
GpuPerRankTest (tests/mpi/test_nccl_communicator.cpp: one GPU per rank). A GPU tensor made
outside them has no compute stream and throws on a GPU, however well it passes without one.

  gpu_tests.py check DIR...     every TEST/TEST_F/TEST_P in DIR/*.cpp that touches a CUDA
                                device (Device::cuda, a DeviceContext, a GPU-only skip,
                                device = cuda, an instantiation over kTestDevices) must use a
                                GPU fixture; prints each offender as file:line and exits 1.
                                Code that exists only without CUDA (#ifndef
                                MIRRORED_WITH_CUDA, or the #else of #ifdef) and tests that
                                skip when a GPU is present are CPU checks.
  gpu_tests.py filter DIR...    the --gtest_filter that runs exactly the tests of GPU fixtures
                                (for launch/gpu_selftest.sh); with --count, the number of tests
                                (a parameterised test counts once per device) on stderr.
"""
import os
import re
import sys

GPU_ROOTS = {"GpuTest", "CudaTest", "DeviceTest", "GpuPerRankTest"}

# What touches a CUDA device in a test body (after comments and CPU-only code are removed).
TOUCHES = [
    (re.compile(r"\bDevice::cuda\s*\("), "a tensor or model on Device::cuda"),
    (re.compile(r"\bMIRRORED_SKIP_WITHOUT_CUDA\b"), "MIRRORED_SKIP_WITHOUT_CUDA"),
    (re.compile(r"!\s*(?:\w+::)*cuda_present\s*\(\s*\)"), "a skip unless cuda_present()"),
    (re.compile(r"\bcontext_for\s*\("), "context_for()"),
    (re.compile(r"\bDeviceContext\b\s*(?:\w+\s*)?[({]"), "a kernels::DeviceContext"),
    (re.compile(r"\bRuntime\s+\w+\s*\([^;]*DeviceChoice::kCuda"), "a Runtime with device = cuda"),
]
# A test that skips when a GPU is present (or in a CUDA build) checks CPU-side behaviour; so
# does one that says, in a comment starting "CPU check:", why naming cuda:0 does no GPU work.
CPU_ONLY = re.compile(r"if\s*\(\s*(?:\w+::)*(?:cuda_present|cuda_built)\s*\(\s*\)\s*\)\s*GTEST_SKIP")
CPU_CHECK_NOTE = re.compile(r"//\s*CPU check:")

TEST_RE = re.compile(r"\b(TEST|TEST_F|TEST_P)\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)\s*\{")
CLASS_RE = re.compile(r"\b(?:class|struct)\s+(\w+)\s*(?:final\s*)?:\s*([^{;]+)\{")
INSTANTIATE_RE = re.compile(r"\bINSTANTIATE_TEST_SUITE_P\s*\(\s*(\w+)\s*,\s*(\w+)\s*,(.*?)\)\s*;", re.S)


def strip_comments(text):
    """Comments and string literals blanked (newlines kept, so offsets keep their lines)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + " " * max(0, j - i - 1))
            i = j + 1
        elif c == "'" and i > 0 and not text[i - 1].isalnum():  # not a digit separator
            j = i + 1
            while j < n and text[j] != "'":
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (j - i + 1))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_cpu_only(text):
    """Lines compiled only without CUDA blanked: #ifndef MIRRORED_WITH_CUDA bodies and the
    #else branches of #ifdef MIRRORED_WITH_CUDA (nested conditionals are followed)."""
    lines = text.split("\n")
    stack = []  # per open conditional: (kind, in_else) with kind "cuda", "nocuda" or "other"
    out = []
    for line in lines:
        s = line.strip()
        m = re.match(r"#\s*(ifdef|ifndef|if|elif|else|endif)\b(.*)", s)
        if m:
            what, rest = m.group(1), m.group(2)
            if what in ("ifdef", "ifndef", "if"):
                if "MIRRORED_WITH_CUDA" in rest:
                    negated = what == "ifndef" or re.search(r"!\s*defined", rest)
                    stack.append(["nocuda" if negated else "cuda", False])
                else:
                    stack.append(["other", False])
            elif what in ("else", "elif") and stack:
                stack[-1][1] = True
            elif what == "endif" and stack:
                stack.pop()
            out.append("")
            continue
        cpu_only = any((k == "cuda" and e) or (k == "nocuda" and not e) for k, e in stack)
        out.append("" if cpu_only else line)
    return "\n".join(out)


def body_end(text, open_brace):
    depth = 0
    for i in range(open_brace, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return len(text)


def base_names(bases):
    names = []
    for part in re.sub(r"<[^<>]*>", "", bases).split(","):
        words = part.replace("public", "").replace("protected", "").replace("private", "").split()
        if words:
            names.append(words[-1].split("::")[-1])
    return names


def scan(paths):
    """(gpu fixtures, tests, instantiations) over every file, fixtures resolved transitively."""
    parents, tests, instantiations = {}, [], []
    for path in paths:
        raw = strip_cpu_only(open(path, encoding="utf-8").read())
        text = strip_comments(raw)
        for m in CLASS_RE.finditer(text):
            parents.setdefault(m.group(1), set()).update(base_names(m.group(2)))
        for m in TEST_RE.finditer(text):
            end = body_end(text, m.end() - 1)
            line = text.count("\n", 0, m.start()) + 1
            noted = bool(CPU_CHECK_NOTE.search(raw[m.end():end]))
            tests.append((path, line, m.group(1), m.group(2), m.group(3), text[m.end():end], noted))
        for m in INSTANTIATE_RE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            instantiations.append((path, line, m.group(1), m.group(2), m.group(3)))
    gpu = set(GPU_ROOTS)
    changed = True
    while changed:
        changed = False
        for name, bases in parents.items():
            if name not in gpu and bases & gpu:
                gpu.add(name)
                changed = True
    return gpu, tests, instantiations


def sources(dirs):
    files = []
    for d in dirs:
        if os.path.isfile(d):
            files.append(d)
            continue
        for name in sorted(os.listdir(d)):
            if name.endswith((".cpp", ".h", ".cu")):
                files.append(os.path.join(d, name))
    return files


def check(dirs):
    gpu, tests, instantiations = scan(sources(dirs))
    problems = []
    for path, line, kind, suite, name, body, noted in tests:
        if kind != "TEST" and suite in gpu:
            continue
        if noted or CPU_ONLY.search(body):
            continue
        for pattern, what in TOUCHES:
            if pattern.search(body):
                fixture = "no fixture" if kind == "TEST" else f"fixture {suite}, not derived from a GPU fixture"
                problems.append(f"{path}:{line}: {suite}.{name} touches a CUDA device ({what}) with {fixture}; "
                                f"derive it from testing::GpuTest, testing::CudaTest or testing::DeviceTest")
                break
    for path, line, prefix, suite, args in instantiations:
        if "kTestDevices" in args and suite not in gpu:
            problems.append(f"{path}:{line}: {prefix}/{suite} is instantiated over kTestDevices (cuda:0) but "
                            f"{suite} does not derive from testing::DeviceTest")
    for p in problems:
        print(p)
    count = sum(1 for t in tests if t[2] != "TEST" and t[3] in gpu)
    if problems:
        print(f"gpu_tests: {len(problems)} test(s) touch a CUDA device outside the GPU fixtures")
        return 1
    print(f"gpu_tests: every test that touches a CUDA device uses a GPU fixture ({count} GPU tests)")
    return 0


def gtest_filter(dirs, count):
    gpu, tests, _ = scan(sources(dirs))
    plain, param = set(), set()
    n = 0
    for _, _, kind, suite, _, _, _ in tests:
        if kind == "TEST_F" and suite in gpu:
            plain.add(suite)
            n += 1
        elif kind == "TEST_P" and suite in gpu:
            param.add(suite)
            n += 2  # each parameterised test runs on the CPU and on cuda:0
    patterns = [f"{s}.*" for s in sorted(plain)] + [f"*/{s}.*" for s in sorted(param)]
    print(":".join(patterns) if patterns else "-*")
    if count:
        print(n, file=sys.stderr)
    return 0


def main(argv):
    if len(argv) < 3 or argv[1] not in ("check", "filter"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    dirs = [a for a in argv[2:] if a != "--count"]
    for d in dirs:
        if not os.path.exists(d):
            print(f"gpu_tests: no such file or folder '{d}'", file=sys.stderr)
            return 2
    if argv[1] == "check":
        return check(dirs)
    return gtest_filter(dirs, "--count" in argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))

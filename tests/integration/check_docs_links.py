"""Every relative link in the Markdown documentation must resolve: README.md, docs/*.md and
the README.md of each top-level folder. A link names a file or folder that exists; a
#anchor into a Markdown page names one of its headings (GitHub's rule for heading ids) or
an explicit <a name=...>/id=... anchor. Links inside code blocks and code spans are text,
not links. Web addresses (any scheme:) are not fetched.
usage: check_docs_links.py SOURCE_DIR"""
import os
import re
import sys
from urllib.parse import unquote

FENCE = re.compile(r"^ {0,3}(```|~~~)")
ATX_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)[ \t]*#*[ \t]*$")
# A code span: a run of backticks, then anything not crossing a blank line, then the same run.
CODE_SPAN = re.compile(r"(`+)(?:(?!\n\s*\n).)*?(?<!`)\1(?!`)", re.S)
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)", re.M)
EXPLICIT_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"|\sid=\"([^\"]+)\"")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def documentation_files(root):
    files = [os.path.join(root, "README.md")]
    docs = os.path.join(root, "docs")
    for folder, _, names in sorted(os.walk(docs)):
        files += [os.path.join(folder, n) for n in sorted(names) if n.endswith(".md")]
    for entry in sorted(os.listdir(root)):
        readme = os.path.join(root, entry, "README.md")
        if entry not in ("docs",) and not entry.startswith(("build", ".")) and os.path.isfile(readme):
            files.append(readme)
    return files


def prose_lines(text):
    """The lines outside fenced code blocks, as (line number, text); fences become blank."""
    inside, fence = False, ""
    for number, line in enumerate(text.split("\n"), 1):
        match = FENCE.match(line)
        if match and (not inside or line.strip().startswith(fence)):
            inside, fence = (not inside), match.group(1)
            yield number, ""
        else:
            yield number, "" if inside else line


def heading_id(heading):
    """GitHub's id for a heading: its text as rendered, lower case, without punctuation
    other than '-' and '_', each space a '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link shows its text
    text = re.sub(r"<[^>]+>", "", text)
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors_of(path, cache={}):
    if path not in cache:
        text = open(path, encoding="utf-8").read()
        seen, anchors = {}, set()
        for _, line in prose_lines(text):
            match = ATX_HEADING.match(line)
            if match:
                base = heading_id(match.group(1))
                count = seen.get(base, 0)
                seen[base] = count + 1
                anchors.add(base if count == 0 else f"{base}-{count}")
        for match in EXPLICIT_ANCHOR.finditer(text):
            anchors.add(match.group(1) or match.group(2))
        cache[path] = anchors
    return cache[path]


def links_of(path):
    """(line number, target) of every link outside code."""
    lines = dict(prose_lines(open(path, encoding="utf-8").read()))
    prose = "\n".join(lines[n] for n in sorted(lines))
    # Code spans become spaces of the same shape, so line numbers stay right.
    prose = CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), prose)
    for pattern in (INLINE_LINK, REFERENCE_DEFINITION):
        for match in pattern.finditer(prose):
            target = match.group(1)
            if target.startswith("<") and target.endswith(">"):
                target = target[1:-1]
            yield prose.count("\n", 0, match.start()) + 1, target


def check(root):
    root = os.path.realpath(root)
    problems, checked = [], 0
    files = documentation_files(root)
    for source in files:
        if not os.path.isfile(source):
            problems.append(f"{os.path.relpath(source, root)}: missing")
            continue
        where = os.path.relpath(source, root)
        for line, target in links_of(source):
            if not target or SCHEME.match(target):
                continue
            checked += 1
            path_part, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(source), unquote(path_part))) if path_part else source
            if os.path.commonpath([root, os.path.realpath(resolved)]) != root:
                problems.append(f"{where}:{line}: link '{target}' leaves the repository")
            elif not os.path.exists(resolved):
                problems.append(f"{where}:{line}: link '{target}': no such file {os.path.relpath(resolved, root)}")
            elif anchor and resolved.endswith(".md") and unquote(anchor) not in anchors_of(resolved):
                problems.append(f"{where}:{line}: link '{target}': no heading with id '{anchor}' in "
                                f"{os.path.relpath(resolved, root)}")
    return files, checked, problems


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    files, checked, problems = check(sys.argv[1])
    if problems:
        sys.exit("FAIL: broken links in the documentation:\n  " + "\n  ".join(problems))
    if checked == 0:
        sys.exit("FAIL: no relative links found: the documentation files or this check are broken")
    print(f"ok: {checked} relative links in {len(files)} Markdown files resolve")


if __name__ == "__main__":
    main()

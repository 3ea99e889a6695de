"""The key table of docs/configuration.md must match `mirrored train --help`: the same keys
and flags in both, and the same defaults (numbers compared as numbers).
usage: check_config_docs.py docs/configuration.md HELP_TEXT_FILE"""
import re
import sys

SECTION = "## Keys"

page_path = sys.argv[1]
page, help_text = open(page_path).read(), open(sys.argv[2]).read()

help_options = {}  # name -> default ('' for flags and valueless options)
for match in re.finditer(r"^  (?:-\w \[ )?--([\w.]+)(?: \])?(?: (\S+))?", help_text, re.M):
    name, default = match.group(1), match.group(2) or ""
    help_options[name] = "" if default == "arg" else default
help_options.pop("help", None)
if not help_options:
    sys.exit("FAIL: no options found in `mirrored train --help`: its format changed, or this check is broken")

section = re.split(rf"^{re.escape(SECTION)}[ \t]*$", page, maxsplit=1, flags=re.M)
if len(section) != 2:
    sys.exit(f"FAIL: {page_path} has no '{SECTION}' section")
body = re.split(r"^##", section[1], maxsplit=1, flags=re.M)[0]
page_options = {}
for row in re.finditer(r"^\| `(?:--)?([\w.]+)[^`]*` \|([^|]*)\|", body, re.M):
    default = row.group(2).strip()
    page_options[row.group(1)] = default.strip("`") if default.startswith("`") else ""


def same(a, b):
    try:
        return float(a) == float(b)
    except ValueError:
        return a == b


problems = [f"--{k} is in --help but not in the table" for k in sorted(help_options.keys() - page_options.keys())]
problems += [f"`{k}` is in the table but not in --help" for k in sorted(page_options.keys() - help_options.keys())]
problems += [f"`{k}`: the table's default is '{page_options[k]}' but --help says '{help_options[k]}'"
             for k in sorted(help_options.keys() & page_options.keys()) if not same(page_options[k], help_options[k])]
if problems:
    sys.exit(f"FAIL: {page_path} ('{SECTION}') and `mirrored train --help` disagree:\n  " + "\n  ".join(problems))
print(f"ok: {page_path} documents all {len(help_options)} options of `mirrored train --help` with their defaults")

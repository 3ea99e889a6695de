"""README's configuration reference must match `mirrored train --help`: the same keys and
flags in both, and the same defaults (numbers compared as numbers).
usage: check_readme_config.py README.md HELP_TEXT_FILE"""
import re
import sys

readme, help_text = open(sys.argv[1]).read(), open(sys.argv[2]).read()

help_options = {}  # name -> default ('' for flags and valueless options)
for match in re.finditer(r"^  (?:-\w \[ )?--([\w.]+)(?: \])?(?: (\S+))?", help_text, re.M):
    name, default = match.group(1), match.group(2) or ""
    help_options[name] = "" if default == "arg" else default
help_options.pop("help", None)

section = readme.split("### Configuration keys", 1)
if len(section) != 2:
    sys.exit("FAIL: README has no '### Configuration keys' section")
body = re.split(r"^##", section[1], maxsplit=1, flags=re.M)[0]
readme_options = {}
for row in re.finditer(r"^\| `(?:--)?([\w.]+)[^`]*` \|([^|]*)\|", body, re.M):
    default = row.group(2).strip()
    readme_options[row.group(1)] = default.strip("`") if default.startswith("`") else ""


def same(a, b):
    try:
        return float(a) == float(b)
    except ValueError:
        return a == b


problems = [f"--{k} is in --help but not in README's table" for k in sorted(help_options.keys() - readme_options.keys())]
problems += [f"`{k}` is in README's table but not in --help" for k in sorted(readme_options.keys() - help_options.keys())]
problems += [f"`{k}`: README default '{readme_options[k]}' but --help says '{help_options[k]}'"
             for k in sorted(help_options.keys() & readme_options.keys()) if not same(readme_options[k], help_options[k])]
if problems:
    sys.exit("FAIL: README.md and `mirrored train --help` disagree:\n  " + "\n  ".join(problems))
print(f"ok: README documents all {len(help_options)} options of `mirrored train --help` with their defaults")

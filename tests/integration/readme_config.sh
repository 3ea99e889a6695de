#!/usr/bin/env bash
# README's configuration table and `mirrored train --help` cannot drift apart.
source "$(dirname "$0")/lib.sh"
"$MIRRORED" train --help >"$WORK/help.txt"
python3 "$SOURCE_DIR/tests/integration/check_readme_config.py" "$SOURCE_DIR/README.md" "$WORK/help.txt"

#!/usr/bin/env bash
# The key table of docs/configuration.md and `mirrored train --help` cannot drift apart.
source "$(dirname "$0")/lib.sh"
"$MIRRORED" train --help >"$WORK/help.txt"
python3 "$SOURCE_DIR/tests/integration/check_config_docs.py" "$SOURCE_DIR/docs/configuration.md" "$WORK/help.txt"

#!/usr/bin/env bash
# The README's first command: install what is missing, build, run the main job.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/examples/setup.sh" build
cd "$root"
# The main job: a character-level GPT learns the King James Bible (about 6 minutes on 2 cores),
# shows its progress, then prints a sample and where the checkpoint and loss plot are. Extra
# arguments go to `textgen train` (e.g. --resume after a Ctrl-C, or --data FILE).
exec build/examples/textgen/textgen train --force "$@"

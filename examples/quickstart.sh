#!/usr/bin/env bash
# The README's first command: install what is missing, build, run the main job.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/examples/setup.sh" build
cd "$root"
exec build/examples/mlp_demo/mlp_demo "$@"

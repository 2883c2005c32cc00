#!/usr/bin/env bash
# shellcheck disable=SC2086,SC2116 # $(echo $list) joins a list onto one line, on purpose
# The libraries' dynamic symbols, read with nm -D (TAP):
#  - libminigrad (core) needs nothing from the layers, plugins, plotting or stb, and no library
#    of this repository;
#  - each library exports exactly the functions and data its headers declare with MG_API (core:
#    also core/testing/minigrad/testing.h), so no internal symbol (mg_reg_commit, a kernel's
#    inner loop) leaks and no public one is hidden.
#   test_core_symbols.sh SOURCE_ROOT CORE_LIB LAYERS_LIB PLOT_LIB
set -u
src=$1 core=$2 layers=$3 plot=$4 train=$5
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=1; echo "not ok $n - $1"; shift; for l in "$@"; do echo "# $l"; done; }

if ! command -v nm >/dev/null || ! command -v readelf >/dev/null; then
  echo "1..0 # SKIP nm or readelf not found (Debian package binutils)"
  exit 0
fi

# Names declared with MG_API in the given headers.
declared() {
  grep -h '^\(extern \)\?MG_API' "$@" |
    sed -E 's/MG_DEPRECATED\([^)]*\)//; s/\(.*//; s/\[.*//; s/;.*//; s/[[:space:]]+$//; s/.*[^A-Za-z0-9_]//' |
    sort -u
}
# Names a library defines and exports (compiler and runtime names, which start with _, aside).
exported() { nm -D --defined-only "$1" | awk '{print $3}' | grep -v '^_' | sort -u; }

echo "1..6"

bad=$(nm -D --undefined-only "$core" | awk '{print $2}' |
  grep -E '^(mg_layer_|mg_gpt_|mg_config_|mg_cfg_|mg_plugin_|mg_model_|mg_register_|mg_plot|mg_canvas|mg_text_|stbi)' || true)
if [ -z "$bad" ]; then ok "libminigrad needs no layer, plugin, config, GPT, plot or stb symbol"
else not_ok "libminigrad needs symbols from outside the core" $bad; fi

needed=$(readelf -d "$core" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
bad=$(echo "$needed" | grep -E 'minigrad-|stb' || true)
if [ -z "$bad" ]; then ok "libminigrad links no other minigrad library and no stb ($(echo $needed))"
else not_ok "libminigrad links $bad" "NEEDED: $(echo $needed)"; fi

check_exports() { # name lib headers...
  local name=$1 lib=$2
  shift 2
  local extra missing
  extra=$(comm -13 <(declared "$@") <(exported "$lib"))
  missing=$(comm -23 <(declared "$@") <(exported "$lib"))
  if [ -z "$extra$missing" ]; then
    ok "$name exports exactly its $(declared "$@" | wc -l) MG_API declarations"
  else
    not_ok "$name exports other symbols than its MG_API declarations" \
      "exported but not declared with MG_API (internal, should be hidden): $(echo $extra)" \
      "declared with MG_API but not exported: $(echo $missing)"
  fi
}
check_exports libminigrad "$core" "$src"/core/include/minigrad/*.h "$src"/core/testing/minigrad/*.h
check_exports libminigrad-layers "$layers" "$src"/layers/include/minigrad/*.h
check_exports libminigrad-plot "$plot" "$src"/plot/include/minigrad/*.h
check_exports libminigrad-train "$train" "$src"/train/include/minigrad/*.h
exit $failed

#!/usr/bin/env bash
# shellcheck disable=SC2046,SC2012,SC2016
# (pkg-config's output is split into words on purpose; ls -t picks the newest log; '$ORIGIN' is
# literal)
#
# minigrad as an installed library (TAP). In a temporary folder: configure this source tree with
# its own build folder (-Dtests=disabled -Dexamples=true), build, `meson install` into a prefix;
# then, with pkg-config alone (PKG_CONFIG_PATH to the prefix, no path into the source tree):
# build and run a program of our own, a core-only program, a custom op under the gradient checker
# (when it is installed), a positional-scheme plugin the installed `posenc` picks up from
# MINIGRAD_PLUGIN_PATH; run the installed `textgen` without LD_LIBRARY_PATH; move the prefix
# elsewhere and check that its programs still run and find its plugins; and use the source tree as
# a meson subproject, dependency('minigrad').
#
# Run by `meson test --suite install` (tests/install/meson.build sets the variables):
#   MINIGRAD_SOURCE_ROOT  this source tree
#   MINIGRAD_CC           the C compiler of the main build (default cc)
#   MINIGRAD_SANITIZE     set under sanitizer builds: everything is skipped (it builds a plain
#                         tree of its own; the release run covers it)
#   MINIGRAD_KEEP_TMP     set to keep the temporary folder (its path is printed)
set -u

src=${MINIGRAD_SOURCE_ROOT:-}
if [ -z "$src" ]; then
  echo "1..0 # SKIP MINIGRAD_SOURCE_ROOT is not set: run through meson test"
  exit 0
fi
if [ -n "${MINIGRAD_SANITIZE:-}" ]; then
  echo "1..0 # SKIP sanitizer build (b_sanitize=$MINIGRAD_SANITIZE): the install check builds a plain tree of its own, which the release run checks"
  exit 0
fi
for tool in meson ninja pkg-config readelf; do
  if ! command -v $tool >/dev/null; then
    echo "1..0 # SKIP $tool not found"
    exit 0
  fi
done
here=$src/tests/install
read -r -a CC <<<"${MINIGRAD_CC:-cc}"
work=$(mktemp -d "${TMPDIR:-/tmp}/minigrad-install.XXXXXX")
if [ -n "${MINIGRAD_KEEP_TMP:-}" ]; then echo "# keeping $work"; else trap 'rm -rf "$work"' EXIT; fi
P=$work/prefix
jobs=$(nproc 2>/dev/null || echo 2)

n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
not_ok() {
  n=$((n + 1)); failed=1
  echo "not ok $n - $1"
  [ $# -gt 1 ] && [ -f "$2" ] && tail -n 30 "$2" | sed 's/^/# /'
  return 0
}
# run LOG CMD...: runs CMD with stdout and stderr to LOG; its status
run() { local log=$1; shift; "$@" >"$log" 2>&1; }
# The installed programs and what is built against the prefix must find the libraries by
# themselves: never through LD_LIBRARY_PATH (meson test sets one for the main build); plugins
# come from MINIGRAD_PLUGIN_PATH only where a step sets it.
unset LD_LIBRARY_PATH MINIGRAD_PLUGIN_PATH

echo "1..12"

# ---- 1. configure, build, install ---------------------------------------------------------------
# -O0 (buildtype debug): the fastest build; the install works the same at any optimisation.
if run "$work/build.log" meson setup "$work/build" "$src" --prefix "$P" -Dbuildtype=debug \
      -Dtests=disabled -Dexamples=true &&
   run "$work/compile.log" ninja -C "$work/build" -j "$jobs" &&
   run "$work/install.log" meson install -C "$work/build" --no-rebuild; then
  ok "meson setup, build and install into a temporary prefix"
else
  not_ok "meson setup, build and install into a temporary prefix" \
    "$(ls -t "$work"/build.log "$work"/compile.log "$work"/install.log 2>/dev/null | head -n 1)"
  echo "Bail out! nothing is installed to check"
  exit 1
fi
pc=$(find "$P" -name minigrad.pc | head -n 1)
export PKG_CONFIG_PATH=${pc%/*} # the system's own folders stay searched (stb, libcjson)
libdir=$(pkg-config --variable=libdir minigrad)

# ---- 2. what is installed ----------------------------------------------------------------------
missing=()
for f in libminigrad.so.0 libminigrad-layers.so.0 libminigrad-plot.so.0 libminigrad.so \
         libminigrad-layers.so libminigrad-plot.so pkgconfig/minigrad.pc pkgconfig/minigrad-core.pc; do
  [ -e "$libdir/$f" ] || missing+=("$libdir/$f")
done
plugindir=$(pkg-config --variable=plugindir minigrad)
for f in "$plugindir/libalibi.so" "$plugindir/libexample_scale.so" "$P/bin/textgen" \
         "$P/bin/posenc" "$P/bin/gpt" "$P/bin/mlp_demo"; do
  [ -e "$f" ] || missing+=("$f")
done
if [ -n "$(find "$work/build" -name 'libmgtest_*')" ]; then missing+=("(-Dtests=disabled built test plugins)"); fi
if [ ${#missing[@]} -eq 0 ] && [ "$plugindir" = "$libdir/minigrad/plugins" ]; then
  ok "libraries (soname .0), minigrad.pc, minigrad-core.pc, plugins in $plugindir, programs; no test plugins"
else
  not_ok "installed files"; echo "# missing or wrong: ${missing[*]} (plugindir '$plugindir')"
fi

# ---- 3. headers: every public one, each compiling alone; the testing header not -----------------
hdr_bad=()
for h in "$src"/core/include/minigrad/*.h "$src"/layers/include/minigrad/*.h \
         "$src"/plot/include/minigrad/*.h "$src"/include/minigrad/*.h; do
  name=$(basename "$h")
  if [ ! -f "$P/include/minigrad/$name" ]; then hdr_bad+=("$name not installed"); continue; fi
  printf '#include "minigrad/%s"\n' "$name" >"$work/h.c"
  run "$work/h.log" "${CC[@]}" -std=c11 -Wall -Wextra -Werror -fsyntax-only "$work/h.c" \
    $(pkg-config --cflags minigrad) || hdr_bad+=("$name does not compile alone: $(head -n 1 "$work/h.log")")
done
[ -e "$P/include/minigrad/testing.h" ] && hdr_bad+=("testing.h is installed")
if [ ${#hdr_bad[@]} -eq 0 ]; then
  ok "every public header is installed and compiles alone; minigrad/testing.h is not installed"
else
  not_ok "headers"; printf '# %s\n' "${hdr_bad[@]}"
fi

# The program sources are copied out: nothing below reads the source tree.
mkdir -p "$work/app" "$work/out" "$work/myplugins"
cp "$here/consumer.c" "$here/gradcheck_op.c" "$here/bitpos.c" "$src/tests/core_only/core_only.c" \
  "$work/app/"
cd "$work/app" || exit 1
rpath=-Wl,-rpath,$(pkg-config --variable=libdir minigrad)

# ---- 4. a program of our own: custom op, layers, training, checkpoint, plot ---------------------
if run "$work/consumer.log" "${CC[@]}" -std=c11 -Wall -Wextra -Werror consumer.c -o consumer \
      $(pkg-config --cflags --libs minigrad) "$rpath" &&
   run "$work/consumer.run" ./consumer "$work/out" && [ -s "$work/out/loss.png" ]; then
  ok "cc consumer.c \$(pkg-config --cflags --libs minigrad): $(grep '^loss' "$work/consumer.run")"
else
  not_ok "consumer.c against pkg-config minigrad" "$work/consumer.log"
  [ -f "$work/consumer.run" ] && sed 's/^/# /' "$work/consumer.run"
fi

# ---- 5. the core library alone -----------------------------------------------------------------
core_libs=$(pkg-config --libs minigrad-core)
if [[ "$core_libs" == *minigrad-layers* || "$core_libs" == *minigrad-plot* ]]; then
  not_ok "pkg-config --libs minigrad-core names other libraries: $core_libs"
elif run "$work/core.log" "${CC[@]}" -std=c11 -Wall -Wextra -Werror core_only.c -o core_only \
        $(pkg-config --cflags --libs minigrad-core) "$rpath" &&
     run "$work/core.run" ./core_only "$work/out"; then
  ok "a minigrad/core.h program against pkg-config minigrad-core ($core_libs)"
else
  not_ok "core_only.c against pkg-config minigrad-core" "$work/core.log"
  [ -f "$work/core.run" ] && sed 's/^/# /' "$work/core.run"
fi

# ---- 6. a custom op under the installed gradient checker ----------------------------------------
if [ ! -f "$P/include/minigrad/gradcheck.h" ]; then
  skip "custom op under mg_gradcheck" "gradcheck not installed"
elif run "$work/gc.log" "${CC[@]}" -std=c11 -Wall -Wextra -Werror gradcheck_op.c -o gradcheck_op \
        $(pkg-config --cflags --libs minigrad-core) "$rpath" &&
     run "$work/gc.run" ./gradcheck_op; then
  ok "custom op under mg_gradcheck: right backward passes, wrong one caught"
else
  not_ok "custom op under mg_gradcheck" "$work/gc.log"
  [ -f "$work/gc.run" ] && sed 's/^/# /' "$work/gc.run"
fi

# ---- 7. a plugin built outside the tree, found by the installed posenc -------------------------
if run "$work/plugin.log" "${CC[@]}" -std=c11 -Wall -Wextra -Werror -shared -fPIC bitpos.c \
      -o "$work/myplugins/libbitpos.so" $(pkg-config --cflags --libs minigrad) &&
   MINIGRAD_PLUGIN_PATH=$work/myplugins run "$work/list.run" "$P/bin/posenc" --list-schemes &&
   grep -q "^  bitpos .*$work/myplugins/libbitpos.so" "$work/list.run" &&
   grep -q "^  alibi .*$plugindir/libalibi.so" "$work/list.run" &&
   run "$work/list0.run" "$P/bin/posenc" --list-schemes && ! grep -q bitpos "$work/list0.run"; then
  ok "plugin built with cc -shared -fPIC \$(pkg-config ...): listed by the installed posenc from MINIGRAD_PLUGIN_PATH (not without), beside the installed alibi"
else
  not_ok "out-of-tree plugin listed by posenc --list-schemes" "$work/plugin.log"
  [ -f "$work/list.run" ] && sed 's/^/# /' "$work/list.run"
fi

# ---- 8. ... and trained with --------------------------------------------------------------------
if MINIGRAD_PLUGIN_PATH=$work/myplugins run "$work/posenc.run" "$P/bin/posenc" --schemes bitpos \
      --tasks lmax --seeds 0 --steps 4 --batch 8 --eval-every 2 --eval-n 32 --lengths "" \
      --threads 1 --out "$work/out/posenc" &&
   grep -q "^lmax,bitpos,0," "$work/out/posenc/results.csv"; then
  ok "the installed posenc trains with the plugin's scheme"
else
  not_ok "posenc --schemes bitpos" "$work/posenc.run"
fi

# ---- 9. the installed textgen, without LD_LIBRARY_PATH -----------------------------------------
for i in $(seq 1 300); do
  echo "In the beginning the model knew nothing, and every step taught it a little more. $i"
done >"$work/text.txt"
tg_train=(train --data "$work/text.txt" --out "$work/out/tg" --steps 12 --batch 4 --block-size 16
          --n-embd 32 --n-layer 1 --n-head 2 --eval-every 6 --eval-windows 4 --ckpt-every 12
          --sample-tokens 16 --threads 1)
if run "$work/tg.run" "$P/bin/textgen" "${tg_train[@]}" && [ -s "$work/out/tg/loss.png" ] &&
   run "$work/tgs.run" "$P/bin/textgen" sample --ckpt "$work/out/tg/model.safetensors" \
     --tokens 16 --seed 1 --threads 1; then
  ok "installed textgen trains (12 steps), draws its loss plot and samples, no LD_LIBRARY_PATH"
else
  not_ok "installed textgen" "$work/tg.run"
  [ -f "$work/tgs.run" ] && sed 's/^/# /' "$work/tgs.run"
fi

# ---- 9b. ... with the out-of-tree plugin's scheme, and the installed alibi ------------------------
if MINIGRAD_PLUGIN_PATH=$work/myplugins run "$work/tgp.run" "$P/bin/textgen" "${tg_train[@]/$work\/out\/tg/$work/out/tgp}" \
      --pos bitpos &&
   MINIGRAD_PLUGIN_PATH=$work/myplugins run "$work/tgpe.run" "$P/bin/textgen" eval \
      --ckpt "$work/out/tgp/model.safetensors" --data "$work/text.txt" --threads 1 &&
   run "$work/tga.run" "$P/bin/textgen" "${tg_train[@]/$work\/out\/tg/$work/out/tga}" --pos alibi; then
  ok "installed textgen trains and evaluates with --pos bitpos (MINIGRAD_PLUGIN_PATH) and --pos alibi (installed folder)"
else
  not_ok "installed textgen with plugin schemes" "$work/tgp.run"
  for f in tgpe tga; do [ -f "$work/$f.run" ] && sed 's/^/# /' "$work/$f.run"; done
fi

# ---- 10. relocatable: the programs find the libraries relative to themselves, the plugins -------
# relative to the libraries (the configured plugin folder is gone with the old prefix)
runpath=$(readelf -d "$P/bin/textgen" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
mv "$P" "$work/moved"
moved_plugins=$(cd "$work/moved" && pwd -P)${plugindir#"$P"}
if [[ "$runpath" == '$ORIGIN'* ]] && run "$work/moved.run" "$work/moved/bin/textgen" --help &&
   run "$work/moved2.run" "$work/moved/bin/mlp_demo" --help &&
   run "$work/moved3.run" "$work/moved/bin/gpt" plugins --schemes &&
   grep -q "^  alibi .*$moved_plugins/libalibi.so" "$work/moved3.run" &&
   grep -q "$moved_plugins (beside the library)" "$work/moved3.run" &&
   grep -q "$plugindir (installed, missing)" "$work/moved3.run"; then
  ok "programs carry RUNPATH $runpath: the prefix moved elsewhere still runs and finds its alibi plugin"
else
  not_ok "relocatable install (RUNPATH '$runpath')" "$work/moved.run"
  [ -f "$work/moved3.run" ] && sed 's/^/# /' "$work/moved3.run"
fi
mv "$work/moved" "$P"

# ---- 11. a meson subproject: dependency('minigrad') ---------------------------------------------
mkdir -p "$work/sub/subprojects"
ln -s "$src" "$work/sub/subprojects/minigrad"
cp consumer.c core_only.c "$work/sub/"
cat >"$work/sub/meson.build" <<'EOF'
project('uses_minigrad', 'c', default_options: ['c_std=c11', 'buildtype=debug'])
minigrad_opts = ['tests=disabled', 'examples=false']
mg = dependency('minigrad', fallback: 'minigrad', default_options: minigrad_opts)
mg_core = dependency('minigrad-core', fallback: 'minigrad', default_options: minigrad_opts)
executable('consumer', 'consumer.c', dependencies: mg)
executable('core_only', 'core_only.c', dependencies: mg_core)
EOF
if (unset PKG_CONFIG_PATH; run "$work/sub.log" meson setup "$work/sub/build" "$work/sub" \
      --force-fallback-for=minigrad,minigrad-core) &&
   run "$work/subc.log" ninja -C "$work/sub/build" -j "$jobs" &&
   mkdir -p "$work/out/sub" &&
   run "$work/sub.run" "$work/sub/build/consumer" "$work/out/sub" &&
   run "$work/subcore.run" "$work/sub/build/core_only" "$work/out/sub"; then
  ok "a meson project with subprojects/minigrad builds and runs against dependency('minigrad') and ('minigrad-core')"
else
  not_ok "meson subproject" "$(ls -t "$work"/sub.log "$work"/subc.log "$work"/sub.run \
    "$work"/subcore.run 2>/dev/null | head -n 1)"
fi

exit $failed

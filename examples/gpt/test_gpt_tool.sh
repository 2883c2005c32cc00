#!/bin/sh
# Smoke test of the gpt tool: init / eval (--dump-grads) / inspect for every positional scheme
# (alibi found in the build tree without MINIGRAD_PLUGIN_PATH), plugins (the search path and what it
# holds; with MG_TEST_PLUGIN_DIR, the test plugins through MINIGRAD_PLUGIN_PATH), and its errors
# on bad input.
set -u
: "${GPT:?set GPT to the gpt binary}"
unset MINIGRAD_PLUGIN_PATH
dir=$(mktemp -d /tmp/mg_gpt_tool_XXXXXX)
trap 'rm -rf "$dir"' EXIT
fails=0
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
bad() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }
check() { # description, then a command that must succeed
    d=$1; shift
    if "$@" >"$dir/out" 2>"$dir/err"; then ok "$d"; else bad "$d: $(cat "$dir/err")"; fi
}
refuse() { # description, expected exit code, expected stderr text, command...
    d=$1; code=$2; text=$3; shift 3
    "$@" >"$dir/out" 2>"$dir/err"
    rc=$?
    if [ "$rc" -eq "$code" ] && grep -qF -- "$text" "$dir/err"; then ok "$d"; else bad "$d: exit $rc, stderr: $(cat "$dir/err")"; fi
}

# batch.bin: B=2 rows of T+1=9 little-endian uint16 tokens below 50
i=0
: >"$dir/batch.bin"
while [ $i -lt 18 ]; do
    printf "\\$(printf '%03o' $(( (i * 7 + 3) % 50 )))\\000" >>"$dir/batch.bin"
    i=$((i + 1))
done

for pos in none learned sinusoidal learned+sinusoidal rope alibi; do
    cat >"$dir/$pos.cfg" <<CFG
[gpt]
vocab_size = 50
block_size = 8
n_layer = 2
n_head = 2
n_embd = 16
pos = $pos
CFG
    check "init pos=$pos" "$GPT" init --config "$dir/$pos.cfg" --out "$dir/$pos.safetensors" --seed 7
    check "eval pos=$pos" "$GPT" eval --ckpt "$dir/$pos.safetensors" --tokens "$dir/batch.bin" --batch 2 --seq 8 \
        --dump-grads "$dir/$pos.grads.safetensors"
    if grep -Eq '^loss ([0-9]\.[0-9]{8}|[0-9]{2}\.[0-9]{7})$' "$dir/out"; then ok "loss line pos=$pos"; else bad "loss line pos=$pos: $(cat "$dir/out")"; fi
    check "inspect pos=$pos" "$GPT" inspect "$dir/$pos.safetensors"
    if grep -q "h.1.mlp.c_proj.weight" "$dir/out" && grep -q "pos $pos" "$dir/out"; then ok "inspect lists pos=$pos"; else bad "inspect output pos=$pos"; fi
    check "gradients carry the parameter names pos=$pos" "$GPT" inspect "$dir/$pos.grads.safetensors"
done
loss1=$("$GPT" eval --ckpt "$dir/rope.safetensors" --tokens "$dir/batch.bin" --batch 2 --seq 8 --threads 1)
loss2=$("$GPT" eval --ckpt "$dir/rope.safetensors" --tokens "$dir/batch.bin" --batch 2 --seq 8 --threads 2)
if [ "$loss1" = "$loss2" ]; then ok "same loss on 1 and 2 threads"; else bad "loss differs with threads: $loss1 / $loss2"; fi

a=$("$GPT" sample --ckpt "$dir/learned.safetensors" --prompt "1 2,3" --n 12 --top-k 5 --seed 3 2>/dev/null)
b=$("$GPT" sample --ckpt "$dir/learned.safetensors" --prompt "1 2,3" --n 12 --top-k 5 --seed 3 --no-cache 2>/dev/null)
if [ -n "$a" ] && [ "$a" = "$b" ] && [ "$(echo "$a" | wc -w)" -eq 12 ]; then ok "sample: KV cache = no cache past block_size"; else bad "sample: '$a' vs '$b'"; fi
refuse "sample a bad prompt" 2 "not a list of token ids" "$GPT" sample --ckpt "$dir/learned.safetensors" --prompt "1 x"
refuse "sample an empty prompt" 2 "gpt sample: --prompt is empty: give at least one token id" "$GPT" sample --ckpt "$dir/learned.safetensors" --prompt "" --n 5
refuse "sample a prompt of separators only" 2 "gpt sample: --prompt ' , ' holds no token id" "$GPT" sample --ckpt "$dir/learned.safetensors" --prompt " , " --n 5
refuse "sample a token id past int64, as typed" 2 "--prompt: token id '99999999999999999999' is out of range 0..2147483647" "$GPT" sample --ckpt "$dir/learned.safetensors" --prompt "1 99999999999999999999"
refuse "sample a token id past int32, as typed" 2 "--prompt: token id '2147483648' is out of range 0..2147483647" "$GPT" sample --ckpt "$dir/learned.safetensors" --prompt "2147483648"
refuse "sample a negative token id" 2 "--prompt: token id '-3' is out of range" "$GPT" sample --ckpt "$dir/learned.safetensors" --prompt "-3"
refuse "sample a prompt past 4096 ids" 2 "--prompt: more than 4096 token ids" "$GPT" sample --ckpt "$dir/learned.safetensors" --prompt "$(seq -s ' ' 0 4096 | sed 's/[0-9][0-9]*/1/g')"
refuse "sample a token beyond the vocabulary" 1 "prompt token 0 is 60" "$GPT" sample --ckpt "$dir/learned.safetensors" --prompt "60"
refuse "batch of the wrong size" 1 "needs 32" "$GPT" eval --ckpt "$dir/none.safetensors" --tokens "$dir/batch.bin" --batch 2 --seq 7
mkdir "$dir/tokdir"
refuse "tokens from a directory" 1 "tokdir: not a regular file" "$GPT" eval --ckpt "$dir/none.safetensors" --tokens "$dir/tokdir" --batch 2 --seq 8
refuse "tokens from a device" 1 "/dev/null: not a regular file" "$GPT" eval --ckpt "$dir/none.safetensors" --tokens /dev/null --batch 2 --seq 8
printf '\001\000\377\000' >"$dir/big.bin"
refuse "token beyond the vocabulary" 1 "byte offset 2 (row 0, position 1): token 255 >= vocab_size 50" "$GPT" eval --ckpt "$dir/none.safetensors" --tokens "$dir/big.bin" --batch 1 --seq 1
refuse "longer than a learned table" 1 "outside the table's 8 rows" "$GPT" eval --ckpt "$dir/learned.safetensors" --tokens "$dir/batch.bin" --batch 1 --seq 17
refuse "missing config" 1 "nope.cfg: cannot open" "$GPT" init --config "$dir/nope.cfg" --out "$dir/x.safetensors"
printf '[gpt]\nn_layers = 2\n' >"$dir/typo.cfg"
refuse "config typo named with line" 1 "typo.cfg:2: [gpt]: unknown key 'n_layers'" "$GPT" init --config "$dir/typo.cfg" --out "$dir/x.safetensors"
printf '[gpt]\nvocab_size = 50\nn_head = 3\nn_embd = 16\n' >"$dir/heads.cfg"
refuse "heads that do not divide the width, with file and line" 1 "heads.cfg:3: [gpt]: n_embd 16 is not a multiple of n_head 3" "$GPT" init --config "$dir/heads.cfg" --out "$dir/x.safetensors"
printf '[gpt]\nvocab_size = 50\npos = nosuchscheme\n' >"$dir/pos.cfg"
refuse "unknown positional scheme, with the file" 1 "pos.cfg: pos: positional scheme 'nosuchscheme' not found" "$GPT" init --config "$dir/pos.cfg" --out "$dir/x.safetensors"
refuse "unknown positional scheme, with the folders searched" 1 "/plugins (build tree)" "$GPT" init --config "$dir/pos.cfg" --out "$dir/x.safetensors"

# the plugin search path: the build tree's folder, listed with where each scheme comes from
check "plugins" "$GPT" plugins
if grep -Eq '^  alibi +alibi +/.*/plugins/libalibi.so$' "$dir/out" && grep -Eq '^  linear +- +built-in$' "$dir/out" &&
    grep -q '(build tree)$' "$dir/out" && ! grep -q 'mgtest' "$dir/out" && ! grep -q 'did not load' "$dir/out"; then
    ok "plugins lists layers with their origin, and no test plugin"
else bad "plugins output: $(cat "$dir/out")"; fi
check "plugins --schemes" "$GPT" plugins --schemes
if grep -q '^  rope ' "$dir/out" && ! grep -q '^  linear ' "$dir/out"; then ok "plugins --schemes lists schemes only"; else bad "plugins --schemes: $(cat "$dir/out")"; fi
if [ -n "${MG_TEST_PLUGIN_DIR:-}" ]; then
    # a plugin whose two schemes are named unlike its file, next to plugins broken on purpose
    sed 's/^pos = .*/pos = zigzag/' "$dir/rope.cfg" >"$dir/zigzag.cfg"
    check "pos = zigzag from a plugin of another name" env MINIGRAD_PLUGIN_PATH="$MG_TEST_PLUGIN_DIR" "$GPT" init --config "$dir/zigzag.cfg" --out "$dir/zigzag.safetensors"
    if grep -q 'zigzag_pos' "$dir/out" && grep -q 'libmgtest_bad_abi.so' "$dir/err"; then ok "zigzag built, broken plugins on the way warned about"; else bad "zigzag: $(cat "$dir/out" "$dir/err")"; fi
    check "plugins with MINIGRAD_PLUGIN_PATH" env MINIGRAD_PLUGIN_PATH="$MG_TEST_PLUGIN_DIR" "$GPT" plugins --schemes
    if grep -Eq '^  tilt +tilt_pos +/.*libmgtest_two_schemes.so$' "$dir/out" && grep -q 'libmgtest_bad_abi.so: layer' "$dir/out" &&
        grep -q '(MINIGRAD_PLUGIN_PATH)$' "$dir/out"; then ok "plugins lists the test folder first, its failures with reasons"
    else bad "plugins with MINIGRAD_PLUGIN_PATH: $(cat "$dir/out")"; fi
else
    echo "# test plugins not built: the MINIGRAD_PLUGIN_PATH checks skipped"
fi
# a scheme nothing provides, named in the file's metadata: the message names the file
sed 's/"pos":"learned"/"pos":"bogus12"/' "$dir/learned.safetensors" >"$dir/bogus.safetensors"
refuse "unknown scheme in a checkpoint, with the file" 1 "bogus.safetensors: pos: positional scheme 'bogus12' not found" "$GPT" inspect "$dir/bogus.safetensors"
head -c 100 "$dir/rope.safetensors" >"$dir/trunc.safetensors"
refuse "truncated checkpoint" 1 "trunc.safetensors" "$GPT" inspect "$dir/trunc.safetensors"
# one byte of the last weight changed: refused by its checksum, not evaluated as another model
cp "$dir/rope.safetensors" "$dir/flip.safetensors"
size=$(wc -c <"$dir/flip.safetensors")
printf '\125' | dd of="$dir/flip.safetensors" bs=1 seek=$((size - 3)) conv=notrunc 2>/dev/null
refuse "a changed weight byte" 1 "flip.safetensors: checksum mismatch" "$GPT" eval --ckpt "$dir/flip.safetensors" --tokens "$dir/batch.bin" --batch 2 --seq 8
refuse "unknown command" 2 "unknown command 'train'" "$GPT" train
# each command's usage line names the program and the command once
for cmd in init eval inspect sample plugins; do
    "$GPT" $cmd --help >"$dir/out" 2>"$dir/err"
    rc=$?
    first=$(head -n 1 "$dir/out")
    if [ "$rc" -eq 0 ] && [ "${first#"usage: gpt $cmd "}" != "$first" ] && [ "$(echo "$first" | grep -o 'gpt' | wc -l)" -eq 1 ]; then
        ok "$cmd --help: '$first'"
    else bad "$cmd --help: exit $rc, usage line '$first'"; fi
done
refuse "missing options" 2 "required" "$GPT" eval --ckpt "$dir/rope.safetensors"
refuse "absurd sizes (no overflow)" 2 "--seq: 6843146995085801406 is out of range 1..16777216" "$GPT" eval --ckpt "$dir/rope.safetensors" --tokens "$dir/batch.bin" --batch 31 --seq 6843146995085801406
refuse "threads past int" 2 "--threads: 4294967297 is out of range 0..1024" "$GPT" eval --ckpt "$dir/rope.safetensors" --tokens "$dir/batch.bin" --batch 2 --seq 8 --threads 4294967297
# sampling options outside their meaning are refused, not read as greedy or "all"
refuse "sample at a negative temperature" 2 "--temperature: -1 is out of range 0..100" "$GPT" sample --ckpt "$dir/learned.safetensors" --prompt 1 --temperature -1
refuse "sample a negative top-p" 2 "--top-p: -1 is out of range 0..1" "$GPT" sample --ckpt "$dir/learned.safetensors" --prompt 1 --top-p -1
refuse "sample a negative top-k" 2 "--top-k: -3 is out of range 0..2147483647" "$GPT" sample --ckpt "$dir/learned.safetensors" --prompt 1 --top-k -3
refuse "sample a NaN temperature" 2 "--temperature expects a number in 0..100, got 'nan'" "$GPT" sample --ckpt "$dir/learned.safetensors" --prompt 1 --temperature nan
# --n once overflowed the history's size in the library: 2^62 tokens are refused by the range
refuse "sample 2^62 tokens" 2 "--n: 4611686018427387904 is out of range 0..16777216" "$GPT" sample --ckpt "$dir/learned.safetensors" --prompt 1 --n 4611686018427387904
refuse "sample INT64_MAX tokens" 2 "--n: 9223372036854775807 is out of range" "$GPT" sample --ckpt "$dir/learned.safetensors" --prompt 1 --n 9223372036854775807
refuse "init seed below 0" 2 "--seed: -5 is out of range 0.." "$GPT" init --config "$dir/rope.cfg" --out "$dir/x.safetensors" --seed -5
refuse "too many tokens" 2 "2^28 tokens in all" "$GPT" eval --ckpt "$dir/rope.safetensors" --tokens "$dir/batch.bin" --batch 16777216 --seq 16777216
# standard output on a full disk: each command that prints fails, naming it and the reason
if [ -c /dev/full ]; then
    for cmd in "inspect $dir/rope.safetensors" "eval --ckpt $dir/rope.safetensors --tokens $dir/batch.bin --batch 2 --seq 8" \
        "sample --ckpt $dir/learned.safetensors --prompt 1 --n 4" "plugins"; do
        # shellcheck disable=SC2086 # the command's words, split on purpose (no spaces in $dir)
        "$GPT" $cmd >/dev/full 2>"$dir/err"
        rc=$?
        if [ "$rc" -eq 1 ] && grep -qF "gpt: standard output: write failed: No space left on device" "$dir/err"; then
            ok "gpt ${cmd%% *} to a full disk fails by name"
        else bad "gpt ${cmd%% *} to a full disk: exit $rc, stderr: $(cat "$dir/err")"; fi
    done
else
    echo "# /dev/full not found: the full-disk checks skipped"
fi
echo "1..$n"
[ "$fails" -eq 0 ]

#!/bin/sh
# The command lines of the one-file demos (mlp_demo, bert_embedding, gpt2_positions): --help says
# what each does and succeeds; an unknown option, a stray argument or a missing value is refused
# with exit status 2 and a message naming it, before any work is done.
set -u
: "${MLP_DEMO:?set MLP_DEMO to the mlp_demo binary}"
: "${BERT_EMBEDDING:?set BERT_EMBEDDING to the bert_embedding binary}"
: "${GPT2_POSITIONS:?set GPT2_POSITIONS to the gpt2_positions binary}"
dir=$(mktemp -d /tmp/mg_demo_args_XXXXXX)
trap 'rm -rf "$dir"' EXIT
fails=0
n=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
bad() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }
helps() { # description, expected stdout text, command...
    d=$1; text=$2; shift 2
    "$@" >"$dir/out" 2>"$dir/err"
    rc=$?
    if [ "$rc" -eq 0 ] && grep -qF -- "$text" "$dir/out" && [ ! -s "$dir/err" ]; then ok "$d"
    else bad "$d: exit $rc, stdout: $(head -c 500 "$dir/out"), stderr: $(cat "$dir/err")"; fi
}
refuse() { # description, expected stderr text, command... (exit status 2, nothing on stdout)
    d=$1; text=$2; shift 2
    "$@" >"$dir/out" 2>"$dir/err"
    rc=$?
    if [ "$rc" -eq 2 ] && grep -qF -- "$text" "$dir/err" && [ ! -s "$dir/out" ]; then ok "$d"
    else bad "$d: exit $rc, stdout: $(head -c 500 "$dir/out"), stderr: $(cat "$dir/err")"; fi
}

helps "mlp_demo --help" "training steps (1..1000000, default 500)" "$MLP_DEMO" --help
helps "mlp_demo --help says what it trains" "three interleaved spirals" "$MLP_DEMO" --help
refuse "mlp_demo unknown option" "mlp_demo: unknown option '--bogus'" "$MLP_DEMO" --bogus
refuse "mlp_demo unknown option after a good one" "unknown option '--step'" "$MLP_DEMO" --steps 2 --step 3
refuse "mlp_demo stray argument" "mlp_demo: unexpected argument 'extra'" "$MLP_DEMO" extra
refuse "mlp_demo missing value" "mlp_demo: --steps needs a value" "$MLP_DEMO" --steps
refuse "mlp_demo value out of range" "mlp_demo: --hidden: '0' is not a whole number in 1..65536" "$MLP_DEMO" --hidden=0
helps "mlp_demo runs with --name=value" "after 2 steps" "$MLP_DEMO" --steps=2 --hidden 8 --threads 1

helps "bert_embedding --help" "It takes no options" "$BERT_EMBEDDING" --help
refuse "bert_embedding unknown option" "bert_embedding: unknown option '--bogus'" "$BERT_EMBEDDING" --bogus
refuse "bert_embedding stray argument" "bert_embedding: unexpected argument 'extra'" "$BERT_EMBEDDING" extra
refuse "bert_embedding --help with more" "unexpected argument 'extra'" "$BERT_EMBEDDING" --help extra

helps "gpt2_positions --help" "--vocab N" "$GPT2_POSITIONS" --help
refuse "gpt2_positions unknown option" "gpt2_positions: unknown option '--bogus'" "$GPT2_POSITIONS" --bogus
refuse "gpt2_positions --vocab without a value" "gpt2_positions: --vocab needs a value" "$GPT2_POSITIONS" --vocab
refuse "gpt2_positions stray argument" "gpt2_positions: unexpected argument '7000'" "$GPT2_POSITIONS" --vocab 700 7000
refuse "gpt2_positions bad value" "gpt2_positions: --vocab: 'x' is not a whole number" "$GPT2_POSITIONS" --vocab=x
helps "gpt2_positions --vocab=N" "sum checked element by element: exact" "$GPT2_POSITIONS" --vocab=70
if [ "$(head -n 1 "$dir/out")" = "gpt2_positions: filling the token table (70 x 1600) and the position table (1024 x 1600) at random..." ]
then ok "gpt2_positions says what it fills before the tables' seconds of work"
else bad "gpt2_positions' first line: $(head -n 1 "$dir/out")"; fi

echo "1..$n"
[ "$fails" -eq 0 ]

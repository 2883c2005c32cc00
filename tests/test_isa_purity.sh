#!/bin/sh
# Disassembles the per-path kernel libraries and checks that each holds only its path's
# instructions, whatever flags the rest of the build used (-march=native by default):
#   avx2     no AVX-512: no EVEX-encoded instruction, no zmm, mask or upper-16 vector register
#   generic  no AVX at all: no VEX or EVEX encoding, no ymm, zmm or mask register
#   avx512   (a check on the checker) does contain EVEX instructions, and no VDPBF16PS (the
#            AVX-512F path, and the bf16 emulation on it, are for CPUs without AVX512-BF16)
#   avx512bf16  contains VDPBF16PS
#   amx      contains TDPBF16PS and no AVX-512 (the tile path's packing stays scalar)
# and that every library has code in it, so an empty or failed disassembly cannot pass.
# Speaks TAP, one case per library. Usage: test_isa_purity.sh CPU_FAMILY [PATH LIBRARY]...
# where PATH is avx512, avx2, generic, avx512bf16 or amx, or absent for a library of a path the build left out (the
# compiler lacked its flags). objdump is found on PATH, or given as $OBJDUMP.

cpu=$1
shift
n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
notok() { n=$((n + 1)); echo "not ok $n - $*"; }

# Every case reported skipped, by name, with the reason $why.
skip_all() {
    while [ $# -ge 2 ]; do
        ok "$1 $(basename "$2") # SKIP $why"
        shift 2
    done
    echo "1..$n"
    exit 0
}

case $cpu in
x86 | x86_64) ;;
*)
    why="not an x86 build ($cpu)"
    skip_all "$@"
    ;;
esac
OBJDUMP=${OBJDUMP:-objdump}
if ! command -v "$OBJDUMP" >/dev/null 2>&1; then
    why="$OBJDUMP not found (binutils)"
    skip_all "$@"
fi

# Prints "instructions evex vex wide first-offender" for one library, where
#   evex: EVEX-encoded instructions or any AVX-512 register (zmm, k0-k7, xmm/ymm16-31, {k} masks)
#   vex:  VEX- or EVEX-encoded instructions or any ymm/zmm/mask register (any AVX at all)
#   wide: instructions on ymm registers (the AVX2 path's own)
# The encoding is read from the first opcode byte: in 64-bit code 0x62 starts an EVEX and 0xc4 /
# 0xc5 a VEX prefix; only segment and address-size prefixes may precede them.
scan() {
    "$OBJDUMP" -d --insn-width=16 "$1" | awk -F '\t' '
        /^[0-9a-f]+ <.*>:$/ { fn = $0; sub(/^[0-9a-f]+ /, "", fn) }
        NF >= 3 && $3 != "" && $3 !~ /^\(bad\)/ {
            insns++
            split($2, b, " ")
            i = 1
            while (b[i] ~ /^(26|2e|36|3e|64|65|67)$/) i++
            op = $3
            if (op ~ /^vdpbf16ps/) dp++
            if (op ~ /^tdpbf16ps/) tdp++
            isevex = b[i] == "62" || op ~ /%zmm|%k[0-7]|%[xy]mm(1[6-9]|2[0-9]|3[01])([^0-9]|$)|\{%k|\{z\}|\{1to/
            isvex = isevex || b[i] == "c4" || b[i] == "c5" || op ~ /%ymm/
            if (op ~ /%ymm/) wide++
            if (isevex) { evex++; if (!fe) fe = fn " " op }
            if (isvex) { vex++; if (!fv) fv = fn " " op }
        }
        END {
            gsub(/[ \t]+/, " ", fe); gsub(/[ \t]+/, " ", fv)
            printf "%d %d %d %d %d %d\t%s\t%s\n", insns, evex, vex, wide, dp + 0, tdp + 0, fe, fv
        }'
}

while [ $# -ge 2 ]; do
    isa=$1 lib=$2
    shift 2
    name="$isa $(basename "$lib")"
    if [ "$isa" = absent ]; then
        ok "$name # SKIP the compiler lacks the path's flags, so the build left it out"
        continue
    fi
    if [ ! -r "$lib" ]; then
        notok "$name: cannot read $lib"
        continue
    fi
    out=$(scan "$lib") || { notok "$name: $OBJDUMP -d failed"; continue; }
    counts=$(printf '%s\n' "$out" | cut -f1)
    first_evex=$(printf '%s\n' "$out" | cut -f2)
    first_vex=$(printf '%s\n' "$out" | cut -f3)
    set -- $counts "$@"
    insns=$1 evex=$2 vex=$3 wide=$4 dp=$5 tdp=$6
    shift 6
    if [ "$insns" -lt 100 ]; then
        notok "$name: only $insns instructions disassembled; the kernels are missing"
        continue
    fi
    case $isa in
    avx2)
        if [ "$evex" -ne 0 ]; then
            notok "$name: $evex AVX-512 instructions, the first in $first_evex"
        elif [ "$wide" -eq 0 ]; then
            notok "$name: no ymm instruction in $insns: not the AVX2 path"
        else
            ok "$name: no AVX-512 in $insns instructions ($wide on ymm)"
        fi
        ;;
    generic)
        if [ "$vex" -ne 0 ]; then
            notok "$name: $vex AVX instructions, the first in $first_vex"
        else
            ok "$name: no AVX in $insns instructions"
        fi
        ;;
    avx512)
        if [ "$evex" -eq 0 ]; then
            notok "$name: no AVX-512 instruction found in $insns: the checker or the path is broken"
        elif [ "$dp" -ne 0 ]; then
            notok "$name: $dp vdpbf16ps in $insns instructions: AVX512-BF16 on the AVX-512F path"
        else
            ok "$name: the checker sees its $evex AVX-512 instructions, no vdpbf16ps"
        fi
        ;;
    avx512bf16)
        if [ "$dp" -eq 0 ]; then
            notok "$name: no vdpbf16ps in $insns instructions: not the AVX512-BF16 path"
        else
            ok "$name: $dp vdpbf16ps in $insns instructions"
        fi
        ;;
    amx)
        if [ "$tdp" -eq 0 ]; then
            notok "$name: no tdpbf16ps in $insns instructions: not the AMX path"
        elif [ "$evex" -ne 0 ]; then
            notok "$name: $evex AVX-512 instructions, the first in $first_evex"
        else
            ok "$name: $tdp tdpbf16ps and no AVX-512 in $insns instructions"
        fi
        ;;
    *)
        notok "$name: unknown path $isa"
        ;;
    esac
done
echo "1..$n"

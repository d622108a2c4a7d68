#!/usr/bin/env bash
# The GPU benchmark, prepared for a GPU machine without internet access. It needs no build
# there: it runs a pdsweep binary built beforehand with both GPU backends
# (`cargo build --release --features gpu`: cuda and wgpu) and prints one table: training tokens/s and MFU of a GPT-2-small-like model
# (124M, context 1024) in f32, bf16 and f16; the logit pass in positions/s; the quick-start
# sweep end to end on the GPU; a stack of 32 small students against the same runs one at a
# time; and, on wgpu, `--devices` with several workers against one. Every section has its own
# time limit and the table shows what it measured or why it could not; the whole script stays
# under 8 minutes.
#
#   benches/gpu.sh --prepare DIR    (on a build machine) copy the release binary, stripped, and
#                                   the Vulkan loader into DIR for the GPU machine
#   benches/gpu.sh [--bundle DIR]   (on the GPU machine) run everything
#   benches/gpu.sh --backend B      cuda, wgpu or all (default: cuda where `pdsweep devices`
#                                   lists a CUDA device, else wgpu; all shares the 8 minutes,
#                                   cuda first, so late wgpu rows may say the time ran out)
#   benches/gpu.sh --tiny           tiny sizes: a dry run on any machine (wgpu on Mesa's
#                                   lavapipe is bound by compiling kernels, about a CPU-minute
#                                   per process: up to 25 minutes; a backend without a device
#                                   only prints why, at once)
#
# Environment: PDSWEEP_BIN (the binary), PDSWEEP_PEAK_FLOPS (the GPU's dense bf16 peak when
# `pdsweep` does not know it; H200/H100: 989.4e12), OUT (a folder for the table and logs);
# cuda also needs the NVIDIA driver, NVRTC and the CUDA headers (CUDA_PATH, else
# /usr/local/cuda), which `pdsweep devices` checks.
set -uo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
TINY=0
BUNDLE=""
PREPARE=""
BACKEND_ARG=auto
while [ $# -gt 0 ]; do
    case "$1" in
        --tiny) TINY=1 ;;
        --bundle) BUNDLE="$2"; shift ;;
        --prepare) PREPARE="$2"; shift ;;
        --backend) BACKEND_ARG="$2"; shift ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
    shift
done
case "$BACKEND_ARG" in
    auto|cuda|wgpu|all) ;;
    *) echo "--backend takes cuda, wgpu or all, not $BACKEND_ARG" >&2; exit 2 ;;
esac

if [ -n "$PREPARE" ]; then
    bin="${PDSWEEP_BIN:-${CARGO_TARGET_DIR:-$HERE/target}/release/pdsweep}"
    [ -x "$bin" ] || { echo "no binary at $bin: run cargo build --release --features gpu first" >&2; exit 2; }
    mkdir -p "$PREPARE"
    cp "$bin" "$PREPARE/pdsweep" && strip "$PREPARE/pdsweep" 2>/dev/null
    loader="$(ldconfig -p 2>/dev/null | awk '/libvulkan.so.1 .*x86-64/ {print $NF; exit}')"
    [ -n "$loader" ] && cp -L "$loader" "$PREPARE/libvulkan.so.1"
    need="$(objdump -T "$PREPARE/pdsweep" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)"
    echo "the binary needs ${need:-an unknown} glibc or newer on the GPU machine (ldd --version)"
    du -sh "$PREPARE"/*
    exit 0
fi

START=$SECONDS
BUDGET=$([ $TINY = 1 ] && echo 1500 || echo 490)   # seconds for all sections together
OUT="${OUT:-$(mktemp -d)}"
LOGS="$OUT/gpu-logs"
mkdir -p "$LOGS"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$WORK/xdg}"
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"

# The binary: --bundle DIR, PDSWEEP_BIN, or this checkout's release build.
BIN="${PDSWEEP_BIN:-}"
if [ -z "$BIN" ] && [ -n "$BUNDLE" ]; then BIN="$BUNDLE/pdsweep"; fi
if [ -z "$BIN" ]; then BIN="${CARGO_TARGET_DIR:-$HERE/target}/release/pdsweep"; fi
[ -x "$BIN" ] || { echo "no pdsweep binary at $BIN (see --prepare)" >&2; exit 2; }
BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"
# A binary built on a newer system than this one fails here at once (e.g. "GLIBC_2.34 not
# found"): say so plainly instead of filling the table with failures.
if ! "$BIN" --version > "$LOGS/version.log" 2>&1; then
    echo "the pdsweep binary does not run on this machine:" >&2; cat "$LOGS/version.log" >&2
    echo "build it on a system with an older (or equal) glibc than this one ($(ldd --version 2>/dev/null | head -1))" >&2
    exit 2
fi

# Vulkan: the loader (bundled if the machine has none) and, on NVIDIA machines whose container
# lacks the ICD file, one pointing at the driver's Vulkan library.
if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1 '; then
    if [ -n "$BUNDLE" ] && [ -e "$BUNDLE/libvulkan.so.1" ]; then
        export LD_LIBRARY_PATH="$(cd "$BUNDLE" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    fi
fi
if ! ls /usr/share/vulkan/icd.d/nvidia_icd*.json /etc/vulkan/icd.d/nvidia_icd*.json >/dev/null 2>&1; then
    glx="$(ldconfig -p 2>/dev/null | awk '/libGLX_nvidia.so.0 / {print $NF; exit}')"
    if [ -n "$glx" ]; then
        printf '{"file_format_version":"1.0.0","ICD":{"library_path":"%s","api_version":"1.3.0"}}\n' \
            "$glx" > "$WORK/nvidia_icd.json"
        export VK_ICD_FILENAMES="$WORK/nvidia_icd.json" VK_DRIVER_FILES="$WORK/nvidia_icd.json"
    fi
fi

# CUDA: NVRTC from the toolkit's own folder when the loader's search path lacks it (a toolkit
# installed from NVIDIA's runfile does not register its lib64 with ldconfig).
CUDA_ROOT="${CUDA_PATH:-/usr/local/cuda}"
if ! ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so'; then
    for d in "$CUDA_ROOT/lib64" "$CUDA_ROOT/targets/x86_64-linux/lib" "$CUDA_ROOT/lib"; do
        if ls "$d"/libnvrtc.so* >/dev/null 2>&1; then
            export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
            echo "NVRTC from $d (not on the loader's search path)" >&2
            break
        fi
    done
fi

ROWS=()
row() { ROWS+=("| $1 | $2 | $3 | $4 | $5 |"); echo "  -> $1 | $2 | $3 | $4 | $5" >&2; }
left() { echo $(( BUDGET - (SECONDS - START) )); }
# runs "$@" with a limit of $1 seconds (capped by what is left), output to $LOGS/$2.log
limited() {
    local limit=$1 name=$2; shift 2
    local l; l=$(left); [ "$l" -lt "$limit" ] && limit=$l
    if [ "$limit" -le 5 ]; then echo "time budget spent" > "$LOGS/$name.log"; return 124; fi
    timeout --kill-after=10 "$limit" "$@" > "$LOGS/$name.log" 2>&1
}
why() { # the last error line of a log, for the table
    local line; line="$(grep -E '^error|panicked|Error' "$LOGS/$1.log" | head -1 | cut -c1-110)"
    [ -z "$line" ] && line="$(tail -1 "$LOGS/$1.log" | cut -c1-110)"
    echo "${line//|//}"
}
# one scalar field of a one-line JSON object on stdin (no python needed on the GPU machine)
json_field() { sed -n "s/.*\"$1\":\(\"[^\"]*\"\|[^,}]*\).*/\1/p" | tr -d '"' | sed 's/^null$//'; }

echo "== devices" >&2
"$BIN" devices > "$LOGS/devices.log" 2>&1
cat "$LOGS/devices.log" >&2
# `pdsweep devices` prints a section per backend ("wgpu devices ...:", "cuda devices ...:"),
# each with one line per device ("  0  NAME  [...]") or one "  none: WHY" line.
section() { awk -v s="$1 devices" 'index($0, s) == 1 {on = 1; next} /^[a-z]/ {on = 0} on' "$LOGS/devices.log"; }
count_of() { section "$1" | grep -cE '^ *[0-9]+  '; }
first_of() { section "$1" | awk '/^ *[0-9]+  / {sub(/^ *[0-9]+  /, ""); sub(/  \[.*/, ""); print; exit}'; }
# the first reason of a "none:" line, and how many more there are
none_why() { section "$1" | sed -n 's/^ *none: //p' | head -1 \
    | awk -F'; ' '{ print $1 (NF > 1 ? " (+" NF - 1 " more, see gpu-logs/devices.log)" : "") }'; }
# "N device(s)", with the first one's name
devices_of() { local n; n="$(count_of "$1")"; echo "$n device(s)$([ "$n" -ge 1 ] && echo " ($(first_of "$1"))")"; }
NCUDA="$(count_of cuda)"; NWGPU="$(count_of wgpu)"
case "$BACKEND_ARG" in
    auto) if [ "$NCUDA" -ge 1 ]; then BACKENDS=(cuda); else BACKENDS=(wgpu); fi ;;
    all) BACKENDS=(cuda wgpu) ;;
    *) BACKENDS=("$BACKEND_ARG") ;;
esac
echo "backends measured: ${BACKENDS[*]} (cuda devices: $NCUDA, wgpu devices: $NWGPU)" >&2

if [ $TINY = 1 ]; then
    MODEL=(--d-model 24 --n-layers 2 --n-heads 3 --d-ff 48 --vocab 256 --context 16 --batch-seqs 16 --steps 3 --warmup 1)
    MODEL_NAME="tiny (d 24, 2 layers, context 16)"
    LIMIT_BENCH=240
else
    MODEL=(--d-model 768 --n-layers 12 --n-heads 12 --d-ff 2048 --vocab 50257 --context 1024 --batch-seqs 16 --steps 10 --warmup 3)
    MODEL_NAME="124M GPT-2-small-like, context 1024, 16K tokens/step"
    LIMIT_BENCH=75
fi

# The backend the rows below measure, its device count and, without one, why.
BK=wgpu; NGPU=0; NONE=""
use_backend() {
    BK=$1
    if [ "$BK" = cuda ]; then NGPU=$NCUDA; else NGPU=$NWGPU; fi
    NONE="no $BK device: $(none_why "$BK")"
    [ "$NGPU" -ge 1 ] || echo "$NONE: the $BK rows say so (see $LOGS/devices.log)" >&2
}

bench_row() { # precision extra-args...
    local p=$1; shift
    local name="bench-$BK-$p${1:+-logits}"
    local setting="$BK, $p${1:+, logit pass top-${2:-}}"
    echo "== $name" >&2
    if [ "$NGPU" -eq 0 ]; then row "$MODEL_NAME" "$setting" "not measured" "-" "$NONE"; return; fi
    limited $LIMIT_BENCH "$name" "$BIN" bench --backend "$BK" --precision "$p" "${MODEL[@]}" --json "$@"
    local rc=$?
    local json; json="$(grep '^{' "$LOGS/$name.log" | tail -1)"
    if [ $rc -eq 0 ] && [ -n "$json" ]; then
        local tps mfu; tps="$(echo "$json" | json_field tokens_per_s)"; mfu="$(echo "$json" | json_field mfu)"
        local what; what=$([ -n "${1:-}" ] && echo "logit pass, top-$2 (positions/s)" || echo "training (tokens/s)")
        row "$MODEL_NAME" "$BK, $p, $what" "$(printf '%.0f' "$tps") /s" \
            "$([ -n "$mfu" ] && awk -v m="$mfu" 'BEGIN { printf "%.1f %%", 100 * m }' || echo 'n/a (peak unknown)')" \
            "warm-up $(echo "$json" | json_field warmup_s | cut -c1-5) s"
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        row "$MODEL_NAME" "$setting" "timed out" "-" "limit ${LIMIT_BENCH} s"
    else
        row "$MODEL_NAME" "$setting" "failed" "-" "$(why "$name")"
    fi
}

# A sweep on the GPU, wall time end to end.
sweep_row() { # label file limit extra-args...
    local label=$1 file=$2 limit=$3; shift 3
    local name; name="$BK-$(basename "$file" .toml)$(echo "$*" | tr -dc 'a-z0-9')"
    echo "== $name $*" >&2
    if [ "$NGPU" -eq 0 ]; then row "$label" "$*" "not measured" "-" "$NONE"; return; fi
    local t0=$SECONDS
    (cd "$WORK" && limited "$limit" "$name" "$BIN" run "$file" --results "$WORK/results-$name" "$@")
    local rc=$? dt=$((SECONDS - t0))
    if [ $rc -eq 0 ]; then
        row "$label" "$*" "done" "-" "${dt} s wall"
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        local n; n="$(grep -c '^ *done\|finished' "$LOGS/$name.log" 2>/dev/null)"
        row "$label" "$*" "timed out" "-" "over ${dt} s ($n runs finished)"
    else
        row "$label" "$*" "failed" "-" "$(why "$name")"
    fi
}

# The quick-start sweep on the GPU (the wgpu tests' sweep in --tiny mode).
quickstart_rows() {
    if [ $TINY = 1 ]; then
        # one model shape for every run (one set of kernels to compile)
        cat > "$WORK/qs-$BK.toml" <<EOF
name = "qs"
backend = "$BK"
[corpus]
val_tokens = "256"
[model]
context = 16
[teachers]
sizes = ["12K"]
tokens = ["4K"]
[students]
sizes = ["12K"]
tokens = ["2K"]
[distill]
mode = ["offline", "online"]
top_k = 8
[train]
batch_tokens = "256"
evals = 2
EOF
        QS_LIMIT=400
        QS_ARGS=(--stack off)   # the stack row measures stacks; auto would probe them here first
    else
        sed "s/^backend = \"cpu\"/backend = \"$BK\"/; s/^name = \"quickstart\"/name = \"qs\"/" \
            "$HERE/sweeps/quickstart.toml" > "$WORK/qs-$BK.toml"
        QS_LIMIT=$([ "$BK" = cuda ] && echo 90 || echo 150)
        QS_ARGS=()
    fi
    sweep_row "quick-start sweep on $BK" "$WORK/qs-$BK.toml" $QS_LIMIT --devices 0 "${QS_ARGS[@]}"
}

# Teachers of another tokenizer (issue 27): a teacher of a trained BPE-640 and students of a
# BPE-384, ULD and GOLD, offline (an aligned logit store) and online, on this checkout's docs as
# text; the GPU runs the composite cross-tokenizer head.
cross_rows() {
    mkdir -p "$WORK/cross-text"
    find "$HERE/docs/src" -name '*.md' -print0 | sort -z | xargs -0 cat > "$WORK/cross-text/docs.txt"
    cat > "$WORK/cross-$BK.toml" <<EOF
name = "cross"
backend = "$BK"
[corpus]
kind = "text"
path = "$WORK/cross-text"
tokenizer = "bpe"
vocab_size = 384
val_tokens = "4K"
[model]
context = 32
[teachers]
tokens = ["48K"]
[[teachers.models]]
name = "t-bpe640"
size = "20K"
tokenizer = "bpe"
vocab_size = 640
[students]
sizes = ["8K"]
tokens = ["24K"]
[distill]
top_k = 16
mode = ["offline", "online"]
cross_tokenizer = ["uld", "gold"]
[train]
batch_tokens = "1K"
evals = 1
EOF
    sweep_row "teacher of another BPE, 4 students (ULD, GOLD; offline, online)" \
        "$WORK/cross-$BK.toml" $([ $TINY = 1 ] && echo 400 || echo 75) --devices 0 --stack off
}

# Several workers: four runs of one shape (four seeds of a teacher, each with an online student
# of its own size) one at a time, then four at once spread over the GPUs (several per GPU on a
# one-GPU machine).
workers_rows() {
    if [ $TINY = 1 ]; then
        W_SIZE=12K; W_CONTEXT=16; W_TEACHER=4K; W_STUDENT=2K; W_BATCH=256; W_LIMIT=300
    else
        W_SIZE=50K; W_CONTEXT=128; W_TEACHER=400K; W_STUDENT=100K; W_BATCH=8K; W_LIMIT=80
    fi
    cat > "$WORK/workers.toml" <<EOF
name = "workers"
backend = "$BK"
[corpus]
val_tokens = "$([ $TINY = 1 ] && echo 256 || echo 4K)"
[model]
context = $W_CONTEXT
[teachers]
sizes = ["$W_SIZE"]
tokens = ["$W_TEACHER"]
seed = [1, 2, 3, 4]
[students]
sizes = ["$W_SIZE"]
tokens = ["$W_STUDENT"]
baseline = false
[distill]
mode = "online"
[train]
batch_tokens = "$W_BATCH"
evals = 1
EOF
    local devs; devs="$(seq -s, 0 $(( (NGPU > 0 ? NGPU : 1) - 1 )))"
    sweep_row "4 teachers + 4 students, 1 worker" "$WORK/workers.toml" $W_LIMIT --jobs 1 --devices 0 --stack off
    sed -i 's/^name = "workers"/name = "workers4"/' "$WORK/workers.toml"
    sweep_row "4 teachers + 4 students, 4 workers" "$WORK/workers.toml" $W_LIMIT --jobs 4 --devices "$devs" --stack off
}

# Stacks (issue 12): benches/stack_gpu.toml's 32 students (16 seeds of an offline student and
# their 16 baselines, all one shape) trained one at a time (`--stack off`) and as one stack
# (`--stack 32`); the stack's tokens/s is the sum over its members, one run alone's the median
# of the solo runs. --tiny: the same layout at the wgpu tests' tiny shape.
stack_sweep() { # --stack value; the status as JSON in $WORK/stack-BK-VALUE.json
    local name="stack-$BK-$1"
    echo "== $name" >&2
    (cd "$WORK" && limited $LIMIT_STACK "$name" "$BIN" run "$WORK/stack-$BK.toml" \
        --results "$WORK/results-$name" --stack "$1" --devices 0) || return 1
    "$BIN" status "$WORK/stack-$BK.toml" --results "$WORK/results-$name" --format json \
        > "$WORK/$name.json"
}
stack_rows() {
    if [ $TINY = 1 ]; then
        cat > "$WORK/stack-$BK.toml" <<EOF
name = "stack"
backend = "$BK"
[corpus]
val_tokens = "256"
[model]
context = 16
[teachers]
sizes = ["12K"]
tokens = ["2K"]
[students]
sizes = ["12K"]
tokens = ["2K"]
seed = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]
[distill]
mode = ["offline"]
top_k = 8
[train]
batch_tokens = "256"
evals = 1
EOF
        LIMIT_STACK=400
    else
        sed "s/^backend = .*/backend = \"$BK\"/" "$HERE/benches/stack_gpu.toml" > "$WORK/stack-$BK.toml"
        LIMIT_STACK=$([ "$BK" = cuda ] && echo 60 || echo 120)
    fi
    local label="stack of 32 students vs one alone"
    if [ "$NGPU" -eq 0 ]; then
        row "$label" "$BK, --stack 32" "not measured" "-" "$NONE"
    elif ! command -v python3 >/dev/null; then
        row "$label" "$BK, --stack 32" "not measured" "-" "no python3 to read the status JSON"
    elif stack_sweep off && stack_sweep 32; then
        local stacked alone members ratio
        IFS='|' read -r stacked alone members ratio < <(python3 - "$WORK/stack-$BK-off.json" \
            "$WORK/stack-$BK-32.json" <<'PY'
import json, statistics, sys
def students(path):
    runs = json.load(open(path))["runs"]
    return [r for r in runs if r["kind"] in ("student", "baseline") and r["tokens_per_s"]]
alone = statistics.median(r["tokens_per_s"] for r in students(sys.argv[1]))
members = [r for r in students(sys.argv[2]) if r.get("stack")]
stacked = sum(r["tokens_per_s"] for r in members)
print(f"{stacked:.0f}|{alone:.0f}|{len(members)}|{stacked / alone:.1f}")
PY
)
        row "$label" "$BK, --stack 32 ($members stacked)" "$stacked vs $alone tokens/s" "-" "${ratio}x one alone"
    else
        local last; last="$(ls -t "$LOGS"/stack-"$BK"-*.log 2>/dev/null | head -1)"
        row "$label" "$BK, --stack 32" "failed or timed out" "-" \
            "$([ -n "$last" ] && why "$(basename "$last" .log)")"
    fi
}

# The rows, backend by backend. On cuda: the three precisions (bf16 trains there: burn computes
# in it), the logit pass, the quick start, the cross-tokenizer sweep and the stack; wgpu adds
# the workers rows.
for b in "${BACKENDS[@]}"; do
    use_backend "$b"
    if [ $TINY = 0 ]; then LIMIT_BENCH=$([ "$BK" = cuda ] && echo 70 || echo 75); fi
    bench_row f32
    bench_row bf16
    bench_row f16
    bench_row f32 --logits 32
    quickstart_rows
    cross_rows
    if [ "$BK" = wgpu ]; then workers_rows; fi
    stack_rows
done

{
    echo
    echo "pdsweep GPU benchmark: $(date -u +%Y-%m-%dT%H:%MZ), backends: ${BACKENDS[*]}; cuda: $(devices_of cuda); wgpu: $(devices_of wgpu); $($BIN --version 2>/dev/null)"
    echo "MFU = model FLOPs (6·N_matmul + 12·L·d·T per token, PaLM) / the GPU's dense bf16 peak"
    echo
    echo "| measurement | setting | result | MFU | notes |"
    echo "|---|---|---|---|---|"
    for r in "${ROWS[@]}"; do echo "$r"; done
    echo
    echo "total $((SECONDS - START)) s; logs in $LOGS"
} | tee "$OUT/gpu-table.md"

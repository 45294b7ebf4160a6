# The recording bash prelude: every bash the capture harness starts reads it first (BASH_ENV).
#
# CI scripts hand shell strings to bash; CI's bash expands arrays sourced from model .sh files, $(dirname ..),
# arithmetic and quoting, then starts a launcher (python3, torchrun, ray ...). Here a real bash does the same
# expansion, but PATH holds only a few real text tools, every other command is a successful no-op, and each
# launcher records its final words, its exported environment and its directory instead of running.
#
# Set by the harness (intercept_shell.py): PRTRIAGE_RECORDS (directory of records), PRTRIAGE_TOOLS (the PATH
# directory: text tools, bash/sh, launcher shims), PRTRIAGE_LAUNCHERS (space-separated names),
# PRTRIAGE_PATH (the PATH the caller had, restored in records).
# Everything here must survive `set -euo pipefail` in the scripts that source it, and must leave $?,
# BASH_REMATCH and positional parameters of the script untouched.

[[ -n ${PRTRIAGE_RECORDS:-} && -n ${PRTRIAGE_TOOLS:-} ]] || return 0
if [[ -z ${__prtriage_loaded:-} ]]; then
__prtriage_loaded=1
export PATH=$PRTRIAGE_TOOLS
hash -r
if [[ -n ${PRTRIAGE_CWD:-} ]]; then
    __prtriage_cwd=$PRTRIAGE_CWD  # the caller asked for a CI host directory absent here
    unset PRTRIAGE_CWD
fi

# Any command outside the allow-list (pkill, nvidia-smi, sleep, pip, huggingface-cli ...) does nothing and
# succeeds, as the GPU host's tools would in the happy path CI relies on.
command_not_found_handle() { return 0; }

__prtriage_is_launcher() {
    local name=$1 launcher
    for launcher in $PRTRIAGE_LAUNCHERS; do
        [[ $name == "$launcher" ]] && return 0
        # python3.11 and friends count as python when python is a launcher.
        if [[ $launcher == python* && $name == python[0-9]* && ${name//[0-9.]/} == python ]]; then
            return 0
        fi
    done
    return 1
}

__prtriage_next_record() {
    local count=0
    if [[ -f $PRTRIAGE_RECORDS/sequence ]]; then
        read -r count < "$PRTRIAGE_RECORDS/sequence" || count=0
    fi
    count=$((count + 1))
    printf '%s\n' "$count" > "$PRTRIAGE_RECORDS/sequence"
    printf -v __prtriage_record_name '%s/launch-%06d' "$PRTRIAGE_RECORDS" "$count"
}

# One launch: argv (NUL-separated, launcher word included), the environment the process would get, cwd.
# The argv file is written last: it is what marks a record complete.
__prtriage_record() {
    if [[ ${1##*/} == python* && ${2:-} == -m && ${3:-} == coverage ]]; then
        local python=$1
        shift 3
        __prtriage_coverage "$python" "$@"
        return 0
    fi
    __prtriage_next_record
    "$PRTRIAGE_TOOLS/env" -0 > "$__prtriage_record_name.env"
    printf '%s' "${__prtriage_cwd:-$PWD}" > "$__prtriage_record_name.cwd"
    printf '%s\0' "$@" > "$__prtriage_record_name.argv"
    return 0
}

# A command named by a path (/usr/bin/python3, ./run.py, $PYTHON) bypasses PATH, so it gets a function of
# the same name (bash allows slashes in function names): a launcher records, a shell script or an allowed
# tool runs for real, a Python script started through its shebang records, anything else is a no-op.
__prtriage_define_path() {
    local path=$1 base=${1##*/} first=""
    declare -F -- "$path" > /dev/null && return 0
    if __prtriage_is_launcher "$base"; then
        eval "$(printf '%q' "$path")() { __prtriage_record \"\$FUNCNAME\" \"\$@\"; }"
        return 0
    fi
    [[ -x $PRTRIAGE_TOOLS/$base ]] && return 0
    if [[ -f $path ]]; then
        read -r first < "$path" || true
        case $first in
            '#!'*python*) eval "$(printf '%q' "$path")() { __prtriage_record \"\$FUNCNAME\" \"\$@\"; }" ;;
            '#!'*sh*) ;;
            *) [[ $path == *.sh ]] || eval "$(printf '%q' "$path")() { return 0; }" ;;
        esac
        return 0
    fi
    eval "$(printf '%q' "$path")() { return 0; }"
    return 0
}

# Runs before every simple command (functrace carries it into functions, subshells and $(...)). It must stay
# cheap and side-effect free: no =~ (BASH_REMATCH belongs to the script), only locals.
__prtriage_route() {
    if [[ -n ${__prtriage_errexit:-} ]]; then  # the command after a skipped one: `set -e` as it was
        [[ $__prtriage_errexit == on ]] && set -e
        unset __prtriage_errexit
    fi
    [[ ${FUNCNAME[1]:-} == __prtriage_* ]] && return 0
    local command=$BASH_COMMAND word name literal
    local -a words
    while :; do  # leading assignments (FOO=1 python3 ...)
        word=${command%%[[:space:]]*}
        name=${word%%=*}
        [[ $word == *=* && -n $name && $name != *[!A-Za-z0-9_]* && $name != [0-9]* ]] || break
        [[ $command == *[[:space:]]* ]] || return 0
        command=${command#*[[:space:]]}
        command=${command#"${command%%[![:space:]]*}"}
    done
    name=${command%%[[:space:]]*}
    word=$name
    case $name in
        source | . | exec | nohup | sudo | command)
            word=${command#"$name"}
            word=${word#"${word%%[![:space:]]*}"}
            word=${word%%[[:space:]]*}
            ;;
    esac
    # One expansion of the command word, as bash is about to do; never when it would run a command. An array's
    # (`"${cmd[@]}"`) is its words, the first of them the command.
    if [[ $word == *[\$\"\']* && $word != *[\`]* && $word != *'$('* ]]; then
        literal=$word
        eval "word=$literal" 2> /dev/null || return 0
        if [[ $literal == *'[@]'* ]]; then
            eval "words=($literal)" 2> /dev/null || return 0
            word=${words[0]:-}
        fi
    fi
    case $name in
        source | .)  # a sourced file runs for real, in this bash; an activate or a CI host's file does not
            if __prtriage_is_activate "$word" || [[ $word != *'$('* && $word != *[\`]* && ! -e $word ]]; then
                __prtriage_skip
                return 1
            fi
            ;;
        *) [[ $word == */* ]] && __prtriage_define_path "$word" ;;
    esac
    return 0
}

# `source .venv/bin/activate`: CI's environment is the harness's interpreter here (the file is absent, and a
# real one would put its own python before the launchers), so the command is skipped; so is the source of any
# file absent here (`source /workspace/isaac-sim/setup_conda_env.sh`: the CI host's), which under `bash -e`
# would end the step before its launches.
__prtriage_is_activate() {
    [[ $1 == activate || $1 == bin/activate || $1 == */bin/activate ]]
}

# Readies the skip of the command the DEBUG trap runs for: the trap then returns non-zero, which under
# extdebug skips the command. Under `set -e` that status would end the shell, so errexit is off until the
# next command's trap puts it back. extdebug is set only at a first skip (set in the startup file, it would
# start the bash debugger) and stays set: turned off and on again inside a function, it no longer skips.
__prtriage_skip() {
    __prtriage_errexit=off
    if [[ $- == *e* ]]; then
        __prtriage_errexit=on
        set +e
    fi
    shopt -s extdebug
}

# cd to a CI host directory (/root/miles) fails here; CI's next command must still run, from there.
cd() {
    if builtin cd "$@" 2> /dev/null; then
        unset __prtriage_cwd
    else
        local target=${!#}
        [[ $target == /* ]] || target=$PWD/$target
        __prtriage_cwd=$target
    fi
    return 0
}

# `PY=$(which python3)`: an empty answer would turn the launch into a no-op; answer as a CI host would.
which() {
    local name found=1
    for name in "$@"; do
        [[ $name == -* ]] && continue
        if __prtriage_is_launcher "${name##*/}" || [[ -x $PRTRIAGE_TOOLS/${name##*/} ]]; then
            printf '/usr/bin/%s\n' "${name##*/}"
            found=0
        fi
    done
    return $found
}

# Wrappers that start their argument as a command: the command must reach the launcher functions.
__prtriage_run() {
    [[ $# -gt 0 ]] || return 0
    [[ $1 == */* ]] && __prtriage_define_path "$1"
    "$@"
}
nohup() { __prtriage_run "$@"; }
sudo() {
    while [[ $# -gt 0 && $1 == -* ]]; do shift; done
    __prtriage_run "$@"
}
timeout() {
    while [[ $# -gt 0 && $1 == -* ]]; do
        case $1 in -s | -k | --signal | --kill-after) shift ;; esac
        shift
    done
    [[ $# -gt 0 ]] && shift
    __prtriage_run "$@"
}
env() {
    local -a assignments=()
    while [[ $# -gt 0 ]]; do
        case $1 in
            -i | --ignore-environment | --) shift ;;
            -u) shift 2 ;;
            [A-Za-z_]*=*) assignments+=("$1"); shift ;;
            *) break ;;
        esac
    done
    if [[ $# -eq 0 ]]; then
        "$PRTRIAGE_TOOLS/env" "${assignments[@]}"
        return
    fi
    (
        [[ ${#assignments[@]} -gt 0 ]] && export "${assignments[@]}"
        __prtriage_run "$@"
    )
}

# A CI script that a CI script runs (`bash tests/functional/dpo.sh`) may end in failure here after its
# launches, checking the metrics or files the training would have written, or before them, on a CI host's
# secret or file absent here. On CI its caller goes on to its next suite, so it does here too: the nested
# shell's status is success, and its failure is noted for the script's report.
bash() { __prtriage_nested bash "$@"; }
sh() { __prtriage_nested sh "$@"; }
__prtriage_nested() {
    local shell=$1 status=0
    shift
    "$PRTRIAGE_TOOLS/$shell" "$@" || status=$?
    if [[ $status -ne 0 ]]; then
        printf '%s %s ended with status %s\n' "$shell" "${1:-}" "$status" >> "$PRTRIAGE_RECORDS/nested-failures"
    fi
    return 0
}

# `train ... | tee $LOG_DIR/run.log`: the log directory is the CI host's (mkdir is a no-op here) or in the
# read-only tree, and under `pipefail` tee's failure would end the script after its first launch. What tee can
# write it writes; its status is always success.
tee() {
    "$PRTRIAGE_TOOLS/tee" "$@" 2> /dev/null || return 0
}

# `uv run [options] X ...` runs X in the project's environment, which here is the harness's interpreter: X
# runs as the recording bash runs any command (`uv run --no-sync bash tests/x.sh`, `uv run coverage run ...`),
# a Python file or `-m module` as python. Every other uv command (sync, venv, pip install) is a no-op.
uv() {
    [[ ${1:-} == run ]] || return 0
    shift
    while [[ $# -gt 0 && $1 == -* ]]; do
        case $1 in
            -m | --module)
                shift
                __prtriage_run python -m "$@"
                return
                ;;
            --)
                shift
                break
                ;;
            --with | --with-editable | --with-requirements | --extra | --group | --only-group | --no-group | \
                --python | -p | --directory | --project | --env-file | --index | --default-index | --index-url | \
                --extra-index-url | --find-links | -f | --package | --config-file | --cache-dir | --exclude-newer | \
                --prerelease | --resolution | --index-strategy | --keyring-provider | --link-mode | --color | \
                --python-platform | --allow-insecure-host | --config-setting | -C)
                shift 2
                ;;
            *) shift ;;
        esac
    done
    __prtriage_python_file "$@"
}

# `coverage run [options] X ...` (or `python -m coverage run ...`) is X run by python, measured: the launch
# is python's, with X and its words. Every other coverage command (combine, report) is a no-op.
coverage() { __prtriage_coverage python "$@"; }
__prtriage_coverage() {
    local python=$1
    shift
    [[ ${1:-} == run ]] || return 0
    shift
    while [[ $# -gt 0 && $1 == -* ]]; do
        case $1 in
            -m | --module)
                shift
                __prtriage_run "$python" -m "$@"
                return
                ;;
            --)
                shift
                break
                ;;
            --concurrency | --context | --data-file | --rcfile | --source | --include | --omit | --debug | \
                --save-signal)
                shift 2
                ;;
            *) shift ;;
        esac
    done
    __prtriage_run "$python" "$@"
}

# A command whose first word is a Python file is that file run by python (`uv run train.py`).
__prtriage_python_file() {
    if [[ ${1:-} == *.py ]]; then
        __prtriage_run python "$@"
    else
        __prtriage_run "$@"
    fi
}

for __prtriage_launcher in $PRTRIAGE_LAUNCHERS; do
    eval "$__prtriage_launcher() { __prtriage_record $__prtriage_launcher \"\$@\"; }"
done
unset __prtriage_launcher

set -o functrace
trap __prtriage_route DEBUG
# `python3 -m sglang.launch_server ... &`: the launcher records in the background; bash must not exit (and
# have its session killed) before it has.
trap wait EXIT
fi

# Helpers shared by the benchmark scripts (sourced, not run).

# median FILES-GLOB JQ-EXPR: the median of EXPR over the JSON files that exist, or "–".
median_of() {
    local glob=$1 expr=$2 values n
    # shellcheck disable=SC2086 # the glob is meant to expand
    values=$(for f in $glob; do
        [ -e "$f" ] && jq -r "$expr" "$f"
    done | grep -v '^null$' | sort -g || true)
    n=$(printf '%s\n' "$values" | grep -c . || true)
    if [ "$n" -eq 0 ]; then
        echo "–"
        return
    fi
    if [ $((n % 2)) -eq 1 ]; then
        printf '%s\n' "$values" | sed -n "$(((n + 1) / 2))p"
    else
        printf '%s\n' "$values" | sed -n "$((n / 2))p;$((n / 2 + 1))p" |
            awk '{s += $1} END {printf "%.6g\n", s / 2}'
    fi
}

# fmt VALUE DECIMALS
fmt() {
    [ "$1" = "–" ] && { echo "–"; return; }
    printf "%.${2}f" "$1"
}

# ratio A B: A/B in percent
ratio() {
    if [ "$1" = "–" ] || [ "$2" = "–" ]; then echo "–"; return; fi
    awk -v a="$1" -v b="$2" 'BEGIN {
        if (b == 0) print "–"; else if (100 * a / b < 10) printf "%.1f %%\n", 100 * a / b;
        else printf "%.0f %%\n", 100 * a / b }'
}

# machine_line: one line naming the kernel, CPUs and memory
machine_line() {
    local cpu mem
    cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
    mem=$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)
    echo "Linux $(uname -r), $(nproc) CPUs ($cpu), $mem"
}

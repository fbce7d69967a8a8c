#!/usr/bin/env bash
# Long fuzzing runs: every cargo-fuzz target (or those named) for FUZZ_SECONDS each (default
# 600), one after the other, starting from the corpus kept in the repository
# (fuzz/corpus/TARGET: hand-made seed-* inputs and min-* inputs from earlier runs). After each
# run the corpus is minimised (cargo fuzz cmin) and what remains is renamed min-<sha1>, the
# names .gitignore keeps: commit them to keep the coverage. Writes bench/fuzz.md: executions,
# speed, coverage (edges and features), corpus size and crashes per target. A crash is kept in
# fuzz/artifacts/TARGET/ and named in the report; the script goes on with the next target and
# exits non-zero at the end.
#
#   bench/fuzz.sh                      # every target, 600 s each
#   FUZZ_SECONDS=60 bench/fuzz.sh opts config_toml
#
# Needs cargo-fuzz (cargo install cargo-fuzz) and a nightly toolchain (or RUSTC_BOOTSTRAP).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh

FUZZ_SECONDS="${FUZZ_SECONDS:-600}"
export PATH="$HOME/.cargo/bin:$PATH"
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    FUZZ_CARGO=(cargo +nightly)
else
    FUZZ_CARGO=(env RUSTC_BOOTSTRAP=1 cargo)
fi

cd fuzz
if (($#)); then
    targets=("$@")
else
    mapfile -t targets < <("${FUZZ_CARGO[@]}" fuzz list)
fi
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

rows=()
failed=0
for t in "${targets[@]}"; do
    echo "=== $t (${FUZZ_SECONDS}s, $(date -u +%H:%M:%S))"
    mkdir -p "corpus/$t" "artifacts/$t"
    before=$(find "corpus/$t" -type f | wc -l)
    "${FUZZ_CARGO[@]}" fuzz build "$t" >"$logs/$t.build" 2>&1 ||
        { cat "$logs/$t.build"; exit 1; }
    rc=0
    "${FUZZ_CARGO[@]}" fuzz run "$t" "corpus/$t" -- \
        -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
        >"$logs/$t.log" 2>&1 || rc=$?
    tail -3 "$logs/$t.log"
    stat() { awk -v k="stat::$1:" '$1 == k {print $2}' "$logs/$t.log" | tail -1; }
    execs=$(stat number_of_executed_units)
    speed=$(stat average_exec_per_sec)
    # The last status line: "#N  DONE   cov: E ft: F corp: C/SIZE ...".
    status=$(grep -E '^#[0-9]+' "$logs/$t.log" | tail -1 || true)
    cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$status")
    ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$status")
    crash="none"
    if ((rc != 0)); then
        failed=1
        art=$(grep -oE "artifacts/$t/[a-z-]+-[0-9a-f]+" "$logs/$t.log" | tail -1 || true)
        crash="**exit $rc** ${art:+(fuzz/$art)}: $(grep -m1 -E 'panicked|ERROR: libFuzzer|SUMMARY' \
            "$logs/$t.log" | sed 's/|/\\|/g' | cut -c1-160)"
    fi
    # Minimise (the inputs that add coverage) and rename to the names the repository keeps.
    # cmin rewrites the directory under content hashes: the hand-made seeds are put back under
    # their names, and a minimised copy of one dropped.
    seeds="$logs/$t.seeds"
    mkdir -p "$seeds"
    find "corpus/$t" -maxdepth 1 -name 'seed-*' -exec cp {} "$seeds/" \;
    "${FUZZ_CARGO[@]}" fuzz cmin "$t" "corpus/$t" >"$logs/$t.cmin" 2>&1 || true
    cp "$seeds"/seed-* "corpus/$t/" 2>/dev/null || true
    seed_sums=$(for f in "$seeds"/seed-*; do
        if [ -e "$f" ]; then sha1sum "$f" | cut -c1-40; fi
    done)
    for f in "corpus/$t"/*; do
        b=$(basename "$f")
        case $b in seed-* | min-*) continue ;; esac
        sum=$(sha1sum "$f" | cut -c1-40)
        if grep -qx "$sum" <<<"$seed_sums"; then
            rm "$f"
        else
            mv "$f" "corpus/$t/min-${sum:0:16}"
        fi
    done
    after=$(find "corpus/$t" -type f | wc -l)
    kib=$(find "corpus/$t" -type f -printf '%s\n' | awk '{s += $1} END {printf "%.0f", s / 1024}')
    rows+=("| \`$t\` | ${FUZZ_SECONDS} | ${execs:-–} | ${speed:-–} | ${cov:-–} | ${ft:-–} | $before → $after ($kib KiB) | $crash |")
done

cd ..
# Keep the rows of targets not run this time.
if (($#)) && [ -f bench/fuzz.md ]; then
    ran=" ${targets[*]} "
    while read -r line; do
        name=$(cut -d'`' -f2 <<<"$line")
        [[ $ran == *" $name "* ]] || rows+=("$line")
    done < <(grep -E '^\| `' bench/fuzz.md)
fi
{
    echo "# Fuzzing"
    echo
    echo "Written by \`bench/fuzz.sh\` on $(date -u +%Y-%m-%d) ($(machine_line)); CI runs every target for 20 s (\`.ci/run\`, fuzz smoke)."
    echo "Each target ran alone for the time shown, from the corpus kept in fuzz/corpus/ (hand-made \`seed-*\` inputs and the minimised \`min-*\` inputs of earlier runs)."
    echo "What each target reads: from the wire, frames (\`wire\`, \`frame_hash\`), LACPDUs and Marker PDUs (\`slow\`, and \`lacp_ops\` for the engine that takes them), stripe frames (\`stripe\`); from peers and users, control socket requests (\`control\`), metrics scrapes (\`metrics_http\`), configuration files (\`config_toml\`), \`--opts\` strings (\`opts\`), other tools' bond configurations (\`import\`), and for the planner flow lists (\`plan_csv\`), captures (\`pcap\`), sFlow (\`sflow\`) and IPFIX (\`ipfix\`)."
    echo
    echo "*Coverage* is libFuzzer's count of instrumented edges reached (*cov*) and of features (edges with hit counts, *ft*) at the end of the run; *corpus* is the number of inputs before the run and after minimising (and their size after)."
    echo
    echo "| target | seconds | executions | execs/s | coverage (edges) | features | corpus | crashes |"
    echo "|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}" | sort
} >bench/fuzz.md.new
mv bench/fuzz.md.new bench/fuzz.md
echo "wrote bench/fuzz.md"
exit "$failed"

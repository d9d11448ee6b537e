#!/usr/bin/env bash
# Print `--scenario NAME` arguments for shard I of N (1-based), round-robin over `killpoint scenarios`.
# Usage: killpoint run $(bash ci/shard.sh "$SHARD" "$SHARDS") --junit out.xml
set -euo pipefail
shard="${1:?shard index, 1-based}"
total="${2:?number of shards}"
killpoint scenarios </dev/null | awk -v i="$shard" -v n="$total" 'NF && (NR - 1) % n == i - 1 { printf "--scenario %s ", $1 }'

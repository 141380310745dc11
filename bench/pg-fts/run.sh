#!/bin/bash
# p50/p99 of each query kind: 1,000 runs each, one client, through pgbench's per-transaction log.
cd "$(dirname "$0")"
for q in common two phrase rare; do
  rm -f pgbench_log.*
  pgbench -h 127.0.0.1 -U postgres -n -f q_$q.sql -t 1000 -c 1 --log --log-prefix=pgbench_log arbor_fts >/dev/null 2>&1
  awk '{print $3}' pgbench_log.* | sort -n | awk -v q=$q '{a[NR]=$1} END {printf "%s: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", q, a[int(NR*0.5)]/1000, a[int(NR*0.99)]/1000, a[NR]/1000}'
done
rm -f pgbench_log.*

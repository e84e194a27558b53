#!/bin/bash
taskset -c 1 sh -c 'while :; do :; done' & H=$!
for k in $(seq 1 12); do
  /tmp/aa/hl.sh v0 1 AVO_EXP_MODE=0
  /tmp/aa/hl.sh vF 1 AVO_EXP_MODE=1
  /tmp/aa/hl.sh vP 1 AVO_EXP_MODE=0 AVO_EXP_POLL=1
  /tmp/aa/hl.sh vPF 1 AVO_EXP_MODE=1 AVO_EXP_POLL=1
  /tmp/aa/hl.sh v4 1 AVO_EXP_MODE=4
done
kill $H

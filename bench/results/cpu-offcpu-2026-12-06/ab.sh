#!/bin/bash
taskset -c 1 sh -c 'while :; do :; done' & H=$!
for k in $(seq 1 25); do HARNESS=/tmp/headwt/build/bin/avo-harness /tmp/aa/hl.sh ho 1 X=1; /tmp/aa/hl.sh hn 1 X=1; done
kill $H

#!/bin/bash
F=/work/main/tests/fixtures/kernels/paired
export PATH=/work/main/build/bin:$PATH
for i in $(seq 1 8); do
  for kind in aa cp; do
    ag=cand.c; [ $kind = cp ] && ag=publish.c
    avo-worker eval $F cand.c --json --cache /tmp/tx/cache --against $ag > $kind-$i.json 2>$kind-$i.err
    echo "$kind $i $(uptime | sed 's/.*average: //' | cut -d, -f1) $(jq -c '[.outcome, .paired.ratio, .paired.low, .paired.ci, [.paired.configs[]? | .ratio]]' $kind-$i.json) $(jq -r 'select(.outcome!="ok") | .detail' $kind-$i.json | cut -c1-200)"
  done
done

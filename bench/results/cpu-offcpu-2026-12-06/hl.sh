#!/bin/bash
# hl TAG N [env...]: A/A by the harness directly
cd /work/main; O=/tmp/aa/cache/obj; C=$O/177cae21eb38dd1c01bcef740b261db26e3b9ae346200e868425b8aae48f0fc7.so; R=$O/5a48de0a3d9b6ebb1a2913d1d6af84a7e99df878e5899064390a79209dcea0db.so
tag=$1; n=$2; shift 2
for i in $(seq 1 $n); do
  env "$@" ${HARNESS:-./build/bin/avo-harness} tests/fixtures/kernels/paired $C $R --seed $RANDOM$i --against $C 3>/tmp/aa/$tag-$i.json 2>/tmp/aa/$tag-$i.err
  jq -c --arg i $i '{i: $i, o: .outcome, r: .paired.ratio, low: .paired.low, c: [.paired.configs[]?.ratio], gap: [.configs[].clock_gap]}' /tmp/aa/$tag-$i.json >> /tmp/aa/$tag.tsv
done

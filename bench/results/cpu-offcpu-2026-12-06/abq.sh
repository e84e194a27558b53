#!/bin/bash
for k in $(seq 1 8); do
  /tmp/aa/hl.sh q0 1 AVO_EXP_MODE=0
  /tmp/aa/hl.sh qP 1 AVO_EXP_MODE=0 AVO_EXP_POLL=1
done

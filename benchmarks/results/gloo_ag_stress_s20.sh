#!/usr/bin/env bash
# Twentieth session, CPU (this machine, torch 2.13.0+cpu): every mode of gloo_ag_stress_s20.py,
# 2 and 3 ranks, 3000 rounds each. Log: gloo_ag_stress_s20.log.
cd "$(dirname "$0")/../.."
for mode in A D B C R T; do
  for world in 2 3; do
    echo "$mode world=$world $(timeout 300 python benchmarks/results/gloo_ag_stress_s20.py $world 3000 $mode 1 2>&1 | grep -E "^exitcodes|tcache|double free|corrupted|invalid pointer" | tr '\n' ' ')"
  done
done

#!/bin/bash
# Lent GPU, second call: ms/step of F.embedding vs indexing on the same machine, then learned positions' quality.
export PYTHONUNBUFFERED=1
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
L=logs/ab; mkdir -p $L
( make setup TORCH=system WHEELS=.whl ) > $L/setup.log 2>&1; echo "setup rc $? at $(el) s" >> $L/setup.log
P=.venv/bin/python; [ -x $P ] || P=python3
T="--config gpu --compile --max-iters 1000 --eval-interval 500 --eval-iters 50 --sample-chars 20"
timeout 70 $P -m course_utils.measure.record $T --out $L/T1-embedding.json > $L/T1.log 2>&1; echo "T1 $? at $(el)" >> $L/setup.log
timeout 70 $P .gpu_index.py $T --out $L/T2-indexing.json > $L/T2.log 2>&1; echo "T2 $? at $(el)" >> $L/setup.log
timeout 70 $P -m course_utils.measure.record $T --set embedding_scale=false --set bias=false --set weight_decay=0.3 --out $L/T3-SBwd3.json > $L/T3.log 2>&1; echo "T3 $? at $(el)" >> $L/setup.log
timeout 25 $P -m course_utils.measure.benchmark_profile --config gpu --device cuda > $L/profile.txt 2>&1; echo "profile $? at $(el)" >> $L/setup.log
left=$((300 - $(el)))
[ $left -gt 60 ] && timeout $left $P -m course_utils.measure.record --config gpu --compile --eval-interval 1000 --eval-iters 100 --sample-chars 100 --positional learned --set embedding_scale=false --set bias=false --set weight_decay=0.3 --out $L/SBLwd3.json > $L/SBLwd3.log 2>&1
echo "learned $? at $(el)" >> $L/setup.log
cp $L/setup.log $L/profile.txt "$OUT"/ 2>/dev/null
tar czf "$OUT/logs.tgz" logs/ab 2>/dev/null

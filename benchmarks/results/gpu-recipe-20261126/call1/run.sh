#!/bin/bash
# Lent GPU: the gpu preset's recipe sweep (concurrent), then the best config-expressible variant alone, timed.
export PYTHONUNBUFFERED=1
start=$(date +%s); el() { echo $(( $(date +%s) - start )); }
L=logs/sweep; mkdir -p $L
( make setup TORCH=system WHEELS=.whl ) > $L/setup.log 2>&1; echo "setup rc $? at $(el) s" >> $L/setup.log
P=.venv/bin/python; [ -x $P ] || P=python3
nvidia-smi > $L/smi.txt 2>&1
R="-m course_utils.measure.record --config gpu --compile --eval-interval 1000 --eval-iters 100 --sample-chars 200"
declare -A V=(
 [S]="--set embedding_scale=false"
 [SB]="--set embedding_scale=false --set bias=false"
 [SBwd3]="--set embedding_scale=false --set bias=false --set weight_decay=0.3"
 [SBlr2]="--set embedding_scale=false --set bias=false --set learning_rate=0.002"
)
for n in "${!V[@]}"; do timeout 300 $P $R ${V[$n]} --out $L/$n.json > $L/$n.log 2>&1 & done
timeout 300 $P .gpu_sweep.py SBemb02 --config gpu --compile --eval-interval 1000 --eval-iters 100 --sample-chars 200 --set embedding_scale=false --set bias=false --out $L/SBemb02.json > $L/SBemb02.log 2>&1 &
wait; echo "sweep done at $(el) s" >> $L/setup.log
best=$($P - <<'PY'
import json, glob, os
rows = []
for f in glob.glob("logs/sweep/*.json"):
    n = os.path.basename(f)[:-5]
    d = json.load(open(f))
    rows.append((d["final"]["val_loss"], n, [round(e["val_loss"], 4) for e in d["evaluations"]]))
for r in sorted(rows): print(*r, file=open("logs/sweep/summary.txt", "a"))
ok = [r for r in sorted(rows) if r[1] != "SBemb02"]
print(ok[0][1] if ok else "SB")
PY
)
echo "best $best at $(el) s" >> $L/setup.log
left=$((560 - $(el)))
if [ $left -gt 120 ]; then
  timeout $left $P -m course_utils.measure.record --config gpu --eval-iters 200 --compile ${V[$best]} > $L/record-best.log 2>&1
  echo "record rc $? at $(el) s" >> $L/setup.log
fi
left=$((575 - $(el)))
if [ $left -gt 50 ]; then
  slug=$($P -c "from course_utils.measure.record import device_slug; print(device_slug('cuda'))")
  timeout $left $P -m course_utils.measure.record --config gpu --eval-iters 200 --max-iters 1000 --eval-interval 250 --set autocast_dtype=float16 ${V[$best]} --out assets/runs/gpu-$slug-fp16.json > $L/record-fp16.log 2>&1
  echo "fp16 rc $? at $(el) s" >> $L/setup.log
fi
cp $L/setup.log $L/summary.txt "$OUT"/ 2>/dev/null
tar czf "$OUT/logs.tgz" logs assets/runs 2>/dev/null
echo "all done at $(el) s" >> "$OUT/setup.log"

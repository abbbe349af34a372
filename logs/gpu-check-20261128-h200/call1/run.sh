#!/bin/bash
# Lent H200, one call: notebook 12's plain loop executed alone (outputs kept), then strict nbval
# of notebook 12 and of every other notebook on CUDA, beside two longer runs of the gpu preset.
export PYTHONUNBUFFERED=1
T0=$(date +%s); el() { echo $(( $(date +%s) - T0 )); }
S=$OUT/summary.txt; L=logs/h200; mkdir -p $L
say() { echo "[$(el) s] $*" | tee -a $S; }
left() { echo $(( $1 - $(el) )); }
make setup TORCH=system WHEELS=.whl > $OUT/setup.log 2>&1; say "setup rc $?"
P=.venv/bin/python; [ -x $P ] || P=python3
{ nvidia-smi; $P -c "import torch, sys; print(sys.version); print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))"; nproc; } >> $S 2>&1
ENV="MPLBACKEND=module://matplotlib_inline.backend_inline OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE= COURSE_CHECK_LADDER=1 PYTHONPATH=$PWD/tests/offline"
NB12=notebooks/12_training_tiny_decoder.ipynb
# 1. notebook 12 alone, outputs kept (its printed loop time is the GPU alone)
t=$(el); timeout 230 env $ENV COURSE_MY_MODEL=$PWD/.scratch12x .venv/bin/jupyter nbconvert --to notebook --execute --output-dir $OUT --output 12_cuda.ipynb --ExecutePreprocessor.timeout=600 --ExecutePreprocessor.kernel_name=python3 $NB12 > $L/nb12-exec.log 2>&1
say "nb12 executed rc $? in $(( $(el) - t )) s"; tail -5 $L/nb12-exec.log >> $S
# 2. beside each other: strict nbval of 12; of every other notebook (8 at a time); two long preset runs
NBV="$P -m pytest --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg --nbval-cell-timeout=600 -p no:cacheprovider"
OTHERS=$(ls notebooks/*.ipynb | grep -v 12_training)
R="-m course_utils.measure.record --config gpu --compile --eval-interval 1000 --eval-iters 100 --sample-chars 200 --set embedding_scale=false --set bias=false --set weight_decay=0.3 --max-iters 10000"
lim=$(left 555)
( t=$(el); timeout $lim env $ENV COURSE_MY_MODEL=$PWD/.scratch12 $NBV $NB12 > $OUT/nb12-nbval.log 2>&1; say "nb12 strict nbval rc $? in $(( $(el) - t )) s" ) &
( t=$(el); timeout $lim env $ENV COURSE_MY_MODEL=$PWD/.scratch_others $NBV -n 8 --dist loadscope --no-loadscope-reorder $OTHERS > $OUT/others-nbval.log 2>&1; say "others strict nbval rc $? in $(( $(el) - t )) s" ) &
( timeout $lim $P $R --out $L/P1-10k-seed1337.json > $OUT/P1.log 2>&1; say "P1 rc $?" ) &
( timeout $lim $P $R --seed 2 --out $L/P2-10k-seed2.json > $OUT/P2.log 2>&1; say "P2 rc $?" ) &
wait
say "all done"
tar czf $OUT/logs.tgz logs/h200 assets/runs benchmarks/results 2>/dev/null
say "tarred"

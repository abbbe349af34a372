#!/bin/bash
# Lent H200, second call: notebooks 08 and 11 under strict nbval on CUDA again, after the
# checker's fix (a reference gradient within atol of zero is rounding, not a gradient).
export PYTHONUNBUFFERED=1
T0=$(date +%s)
make setup TORCH=system WHEELS=.whl > $OUT/setup2.log 2>&1; echo "setup rc $? at $(( $(date +%s) - T0 )) s"
P=.venv/bin/python
timeout 190 env MPLBACKEND=module://matplotlib_inline.backend_inline OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE= COURSE_CHECK_LADDER=1 PYTHONPATH=$PWD/tests/offline COURSE_MY_MODEL=$PWD/.scratch2 $P -m pytest --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg --nbval-cell-timeout=600 -p no:cacheprovider -n 2 --dist loadscope notebooks/08_concat_and_w_o.ipynb notebooks/11_decoder_block_and_logits.ipynb > $OUT/nbval-08-11.log 2>&1
echo "nbval 08 11 rc $? at $(( $(date +%s) - T0 )) s"
tail -5 $OUT/nbval-08-11.log

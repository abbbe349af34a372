"""A record of the gpu preset with the tied table initialised at std 0.02.

Run as .gpu_sweep.py (python .gpu_sweep.py NAME record-args...) by run.sh.
"""

import sys

from torch import nn

import course_utils.train as ct
from course_utils.measure.record import record_run

name = sys.argv[1]
original = ct.build_decoder


def patched(config):
    model = original(config)
    nn.init.normal_(model.token_embedding.weight, mean=0.0, std=0.02)
    return model


ct.build_decoder = patched
record, out = record_run(sys.argv[2:])
print(f"RESULT {name} val {record['final']['val_loss']:.4f} out {out}", flush=True)

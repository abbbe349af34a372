"""A record with TokenEmbedding's rows looked up by indexing (the code before F.embedding).

Run as .gpu_index.py by run.sh.
"""

import sys

import course_utils.embedding as ce
from course_utils.embedding import as_token_ids
from course_utils.measure.record import record_run


def forward(self, ids):
    ids = as_token_ids(ids, self.vocab_size)
    return self.weight[ids] * self.scale


ce.TokenEmbedding.forward = forward
record, out = record_run(sys.argv[1:])
print("RESULT", out, record["timing"].get("ms_per_step_steady"), flush=True)

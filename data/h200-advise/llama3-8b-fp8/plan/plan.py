# profkit advise: at most 25 s of tuning; checked against flashinfer-python 0.7.2.post1.
# flashinfer.autotune(tune_mode, cache, tuning_buckets, round_up, skip_ops, ...): autotuner.py:835
import os

# FlashInfer reads the blocklist once, when it creates its AutoTuner (autotuner.py:1576):
# set it before the process first tunes.
os.environ.setdefault("FLASHINFER_TACTICS_BLOCKLIST", '/tmp/pk/adv-fp8-b25/blocklist.json')
import flashinfer

# Sizes whose own bucket (FlashInfer rounds M up to its next bucket) is not in tuning_buckets
# run the default after tuning: the plan counted that as its expected cost.
with flashinfer.autotune(True, tuning_buckets=(1536, 2048, 3584, 4096)):
    run_model_once()  # your tuning forward

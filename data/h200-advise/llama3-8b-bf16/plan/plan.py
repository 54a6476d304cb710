# profkit advise: at most 1% slower than full tuning; checked against flashinfer-python 0.7.2.post1.
# flashinfer.autotune(tune_mode, cache, tuning_buckets, round_up, skip_ops, ...): autotuner.py:835
# Do not tune bf16_gemm on this GPU: the default (runners[0], tactic -1)
# runs without any tuning pass, so no flashinfer.autotune(True) context is needed.

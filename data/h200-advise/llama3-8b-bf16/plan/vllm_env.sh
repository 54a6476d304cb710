# profkit advise: at most 1% slower than full tuning; checked against vllm-project/vllm kernel_warmup.py (_flashinfer_autotune_skip_ops).
# no tuning at all: vllm serve ... --no-enable-flashinfer-autotune

# profkit advise: at most 25 s of tuning; checked against vllm-project/vllm kernel_warmup.py (_flashinfer_autotune_skip_ops).
export FLASHINFER_TACTICS_BLOCKLIST=/tmp/pk/adv-fp8-b25/blocklist.json
# VLLM_FLASHINFER_AUTOTUNE_TOKEN_SIZES picks dummy-forward sizes, not buckets: the plan's bucket selection (1536, 2048, 3584, 4096) cannot be applied through vLLM.

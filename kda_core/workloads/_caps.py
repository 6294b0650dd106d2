"""The caps on a workload (a ``ValueError`` naming the cap when a file or a generator passes
one): what a trace may hold, what a trace file may hold, and the Mooncake block size."""

MOONCAKE_BLOCK_TOKENS = 512
MAX_REQUESTS = 200_000  # a generated workload
MAX_TOTAL_BLOCKS = 20_000_000
MAX_INPUT_TOKENS = 4_000_000
MAX_OUTPUT_TOKENS = 1_000_000
MAX_SKIP_REASONS = 5  # reasons kept on a trace loaded with on_error="skip" (the count is exact)
MAX_TRACE_FILE_BYTES = 2 << 30  # 2 GiB
MAX_TRACE_REQUESTS = 2_000_000
MAX_TRACE_BLOCKS = 50_000_000  # input + output block ids (8 bytes each: 400 MB)

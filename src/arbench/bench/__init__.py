"""Speed benchmarks: cell training throughput (chunked vs recurrent) and streaming evaluation."""

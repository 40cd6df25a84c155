"""Write a bench's results.

JSONL files written as the run goes, off the event loop (``sink``), live statistics for
the progress display (``live``), the summary in ``vllm bench serve``'s keys
(``bench_summary``; its schema is ``results.summaries``) and its terminal table
(``table``).
"""

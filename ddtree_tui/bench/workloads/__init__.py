"""Workloads past fixed prompt sets (issue 26): mooncake trace replay (`trace.py`), SGLang's generated
shared prefix (`gsp.py`), ShareGPT files (`sharegpt.py`), arrival schedules (`arrivals.py`: gamma bursts,
ramps, trace timestamps), client-side cancellation (`cancel.py`) and what a run records of them
(`record.py`).

One module per workload kind; none imports the engines or bench/prompts.py (the prompt loader imports
them), so a workload is plain data: `WorkItem`s and planned send times.
"""

"""toolcascade's benchmark suite (issue 11): workloads W1-W6 beside the frameworks people pick instead.

``make bench`` runs ``python -m bench.run``; ``bench/RESULTS.md`` holds one
run's full table. Each module is one workload group and runs on its own
(``python -m bench.invoke``).
"""

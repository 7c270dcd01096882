"""Pages: what a person sees of a run or a checked history, rendered from histories and checker results.

Every HTML page shares `layout` (the one stylesheet, the page head, the process lanes and their inline
script `lanes.js`); `story` tells a failing result in words, `counterexample`, `timeline` and `elle` write
self-contained pages, `perf` draws the latency and rate plots. Pages sit above `checkers` and `history`
and below `results`, which publishes them with a run.
"""

"""Elle-class checkers for transactional histories (list-append and rw-register).

After Kingsbury & Alvaro, "Elle: Inferring Isolation Anomalies from Experimental Observations"
(VLDB 2020), and Adya's dependency graphs. `checker.check(history, kind, ...)` is the entry point;
`ElleListAppend` and `ElleRwRegister` are the registry's Checker objects. See docs/checkers.md,
"Transactions".
"""

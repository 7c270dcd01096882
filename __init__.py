"""Faultline: Jepsen-style fault-injection testing of replicated databases.

The repository's top-level folders (node/, cluster/, nemesis/, workloads/, controller/, checkers/,
results/, ...) are the subpackages of this one import package, `faultline` (setuptools maps the
package to the repository root). Importing it loads nothing heavy: nodes import it too.
"""

__version__ = "0.1.0"

"""Tests of the workflows package: the compiler, its differential oracle and the harness.

A package so that workflows defined in its modules have importable keys
(``tests.workflows.corpus_x:wf``) that a restored continuation resolves through the registry.
"""

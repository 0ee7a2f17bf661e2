"""The programs of the documentation in ``docs/``, each included there verbatim.

``tests/docs/test_docs.py`` runs every one of them and checks that the Markdown still shows each
file exactly as it is.
"""

"""Variables and tables over them: the ``Domain`` (names and state counts), integer-coded record arrays,
``Factor`` (a table over a scope, with products, sums and alignment) and the index maps that gather and
scatter cells between tables of different scopes; numeric columns' bins over a public range and their
decoding.

May import: ``ppgm.core``.
"""

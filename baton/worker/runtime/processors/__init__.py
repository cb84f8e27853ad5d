"""The runtime form of a sub-topology: processors by family, one tree of them per task.

``base`` (the node every processor is, and how families register), ``stateless``,
``aggregate`` and ``windowed``, ``joins`` (stream joins), ``table`` (changes, value getters,
table-table and foreign-key joins) and ``custom`` (a user's ``baton.Processor``). Each family
ends with its ``{node type: factory}`` table; ``runtime/tree.py`` reads them.
"""

"""The compiled tape interpreter: recorded programs run as machine code (numba).

``opcodes`` is the instruction set, ``kernel`` the forward and reverse kernels compiled
once per install, ``program`` the lowering of a recording into an instruction table
(each primitive declares its lowering with :func:`program.deflower`, next to its value
and derivative rules). ``sl.compile`` and a model's retaped gradient use it when every
node and guard of a recording lowers and numba is present; otherwise they replay the
recording as generated Python (:mod:`..codegen`), and the eager tape stays the
reference that both are checked against.
"""

"""numba-cuda's lowering set-up made linear for the length of one build; it computes what it did.

Why (timings of W1/W2's sm_90a builds): before lowering a function, numba-cuda's
`Lower._find_singly_assigned_variable` picks the variables it may keep in registers without an
alloca: defined in one block only, used nowhere outside it, and assigned by one statement of that
block. It checks the last condition by scanning the whole block once per candidate variable,
quadratic in the block's length: the generated kernels have blocks of hundreds of statements and
the scan cost 0.06-0.15 s of a 2-3 s build. Here each block's assignments are counted once, and
the set comes out the same, element for element and in the same order.
"""
import collections

from .scoped_patches import Scoped, present


def _targets():
    try:
        from numba.cuda.lowering import Lower
    except ImportError:
        return []
    return present([(Lower, "_find_singly_assigned_variable", _singly_assigned)])


# While active (re-entrant), numba-cuda lowers with the linear set-up.
linear = Scoped(_targets)


def _singly_assigned(original):
    from numba.cuda.core import ir
    from numba.cuda.core.analysis import compute_use_defs, must_use_alloca

    def find_singly_assigned_variable(self):
        if self.func_ir.func_id.is_generator:     # the original's own (empty) answer
            return original(self)
        use_defs = compute_use_defs(self.func_ir.blocks)
        alloca_vars = must_use_alloca(self.func_ir.blocks)
        defined_in = collections.defaultdict(set)
        for blk, names in use_defs.defmap.items():
            for var in names:
                defined_in[var].add(blk)
        used_elsewhere = {var for names in use_defs.usemap.values() for var in names}
        assigns = {}        # block -> Counter of assignment targets, built on first need

        def assigned_once(blk, var):
            if blk not in assigns:
                assigns[blk] = collections.Counter(stmt.target.name
                                                   for stmt in self.blocks[blk].find_insts(ir.assign_types))
            return assigns[blk][var] == 1
        self._singly_assigned_vars = {var for var, blks in defined_in.items()
                                      if var not in alloca_vars and len(blks) == 1 and var not in used_elsewhere
                                      and assigned_once(next(iter(blks)), var)}
        self._blk_local_varmap = {}
    return find_singly_assigned_variable

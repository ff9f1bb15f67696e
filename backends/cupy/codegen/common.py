"""Pieces both mainloops emit identically: the tile scheduler and the module assembly."""
from .epilogue import arg_layout, epilogue_function, finish_kernels, put_functions
from .prelude import prelude


def tile_coords():
    """Tile t -> (l, mt, nt) in grouped order: GROUP_M consecutive m-tiles sweep all n-tiles
    before moving on, so a wave of CTAs shares A rows and B columns in L2."""
    return r"""
__device__ __forceinline__ void evt_tile_coords(const EpiArgs& a, int t, int group_m, int& l, int& mt, int& nt) {
  const int per_batch = a.mtiles * a.ntiles;
  l = t / per_batch;
  const int r = t - l * per_batch;
  const int group = r / (group_m * a.ntiles);
  const int first_m = group * group_m;
  const int rows = min(a.mtiles - first_m, group_m);
  const int rr = r - group * group_m * a.ntiles;
  mt = first_m + rr % rows;
  nt = rr / rows;
}
"""


def module_source(program, spec, header, kernel, aux_words=False):
    """One translation unit: helpers, EpiArgs, the epilogue, reduction puts, the main kernel and
    the reduction init/finish kernels. aux_words: epilogue_function's."""
    layout = arg_layout(program, spec.dtype)
    return "\n".join([
        header,
        prelude(hopper=spec.mainloop == "sm90"),
        layout.c_struct(),
        put_functions(program, spec.deterministic),
        epilogue_function(program, spec, aux_words),
        tile_coords(),
        kernel,
        finish_kernels(program, spec.deterministic, spec.direct_reds),
    ])

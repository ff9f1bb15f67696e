"""The "numpy" backend: the reference interpreter behind the plugin interface, always
available. It is also the worked example for backend authors: a Backend subclass, a Kernel
whose `run` takes (A, B, inputs), and one hook that registers the class."""
from evt_core.backend import Backend, Kernel, Support
from evt_core.plugin import hookimpl


class NumpyBackend(Backend):
    name = "numpy"
    options = {}

    def available(self):
        return Support.yes()

    def compile(self, tree, options):
        from evt_core.interpreter import evaluate_program
        program = tree.program

        def run(A, B, inputs):
            return evaluate_program(program, A, B, inputs)
        return Kernel(self.name, tree, run, stages={"program": tree.program.describe()}, options=options)


@hookimpl
def evt_register_backends(registry):
    registry.add(NumpyBackend)

"""``Work`` and ``PythonScript``: the stages of an app, each with the compute it needs.

A ``Work`` subclass implements ``run(self, **kwargs)``. Called from a flow, ``work.run(...)``
does not execute that body here: it submits a job that executes it on a node with the
project's code, blocks until the job ends and returns a :class:`~bourse.app.result.Result`
(``work.submit(...)`` returns a handle instead). Inside the job, the body runs with
``self.inputs``, ``self.outputs`` (local directories to write into) and ``self.checkpoint``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from bourse.app.tensorboard import PORT as TB_PORT
from bourse.app.tensorboard import launcher
from bourse.app.tensorboard import port as tensorboard_port
from bourse.core.compute import Compute
from bourse.core.errors import InvalidInput
from bourse.core.paths import inside
from bourse.protocol.common import Port, parse_port

if TYPE_CHECKING:
    from bourse.app.handle import Handle
    from bourse.app.result import Result


class Work:
    """One stage. Subclass it and implement ``run(self, **kwargs)``.

    ``compute`` is required (``Compute("cpu")`` for a CPU stage). ``outputs`` names the
    directories the stage writes (uploaded when it ends; the next stage gets them as inputs),
    ``retries`` how often a failed run is tried again, ``cache`` whether an identical call
    (same code, arguments and inputs) reuses the previous result instead of running.
    ``ports`` are ports the stage serves on 127.0.0.1, opened through the exchange at
    ``/jobs/{id}/ports/{port}/`` (``6006`` or ``"6006:keep"``); ``tensorboard="logs"`` starts
    TensorBoard on that log directory beside the stage and declares its port, 6006
    (:mod:`bourse.app.tensorboard`).
    """

    outputs: Any = ()
    compute: Compute | None = None
    retries: int = 0
    cache: bool = False
    env: Mapping[str, str] = {}
    ports: Sequence[int | str | Port] = ()
    tensorboard: str | None = None
    _body: ClassVar[Callable[..., Any] | None] = None

    def __init__(self, compute: Compute | str | None = None, *,
                 outputs: Sequence[str] | None = None, retries: int | None = None,
                 cache: bool | None = None, name: str | None = None,
                 env: Mapping[str, str] | None = None,
                 ports: Sequence[int | str | Port] | None = None,
                 tensorboard: str | None = None) -> None:
        if compute is not None:
            self.compute = Compute(compute) if isinstance(compute, str) else compute
        if outputs is not None:
            self.outputs = tuple(outputs)
        if retries is not None:
            self.retries = retries
        if cache is not None:
            self.cache = cache
        if env is not None:
            self.env = dict(env)
        if ports is not None:
            self.ports = tuple(ports)
        if tensorboard is not None:
            self.tensorboard = tensorboard
        self.name = name or type(self).__name__
        self.inputs: dict[str, Path] = {}
        self.checkpoint: str | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        body = cls.__dict__.get("run")
        if body is not None and not getattr(body, "_bourse_dispatch", False):
            cls._body = body
            cls.run = _dispatcher(body)  # type: ignore[method-assign]

    def run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must implement run(self, **kwargs)")

    def submit(self, *args: Any, **kwargs: Any) -> Handle:
        """Submit the stage and return at once; ``bourse.wait(handle, ...)`` gets the Result."""
        from bourse.app.context import backend

        return backend().submit(self, args, kwargs)

    def output_names(self) -> tuple[str, ...]:
        names = (self.outputs,) if isinstance(self.outputs, str) else tuple(self.outputs)
        for name in names:
            if not isinstance(name, str) or not name.isidentifier():
                raise InvalidInput(f"output name {name!r} of {self.name} is not an identifier",
                                   field="outputs")
        return names

    def port_specs(self) -> list[Port]:
        """The declared ports, TensorBoard's included."""
        try:
            declared = [p if isinstance(p, Port) else parse_port(str(p)) for p in self.ports]
        except ValueError as exc:
            raise InvalidInput(f"stage {self.name!r}: {exc}", field="ports") from None
        if self.tensorboard is not None and all(p.number != TB_PORT for p in declared):
            declared.append(tensorboard_port())
        return declared

    def launch(self, command: list[str]) -> list[str]:
        """The job's command: under TensorBoard's launcher when the stage asks for it."""
        return command if self.tensorboard is None else launcher(self.tensorboard, command)

    def check(self) -> Compute:
        """The stage's Compute; a stage without one is refused before anything is submitted."""
        if self.compute is None:
            raise InvalidInput(f"stage {self.name!r} has no compute",
                               field="compute", hint=f'give it one: {type(self).__name__}'
                               '(compute=Compute("cpu")) or Compute("a100-40gb")')
        if not isinstance(self.compute, Compute):
            raise InvalidInput(f"stage {self.name!r}: compute must be a Compute, got "
                               f"{type(self.compute).__name__}", field="compute")
        if self.tensorboard is not None:
            inside(str(self.tensorboard), field="tensorboard", root="the stage's directory")
        return self.compute


def _dispatcher(body: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(body)
    def run(self: Work, *args: Any, **kwargs: Any) -> Any:
        from bourse.app.context import backend, inside_job

        if inside_job():
            return body(self, *args, **kwargs)
        return backend().submit(self, args, kwargs).result()

    run._bourse_dispatch = True  # type: ignore[attr-defined]
    return run


class PythonScript(Work):
    """A stage that runs a script: ``PythonScript("train.py", compute=Compute("a100"))``.

    ``script.run("--lr", "1e-3", data=result.outputs["shards"])``: positional arguments go to
    the script's command line; keyword arguments that are ``Data`` become inputs (the script
    reads ``BOURSE_INPUT_<NAME>``), other keyword arguments become ``--name value``.
    ``requirements`` lists packages the stage needs (pip requirement specifiers): on the
    exchange they join its compute's ``packages``, which the node installs into the job's
    environment before it starts; a local run checks that this interpreter has them.
    """

    def __init__(self, script_path: str | Path, compute: Compute | str | None = None, *,
                 requirements: Sequence[str] = (), env: Mapping[str, str] | None = None,
                 outputs: Sequence[str] | None = None, retries: int | None = None,
                 cache: bool | None = None, name: str | None = None,
                 ports: Sequence[int | str | Port] | None = None,
                 tensorboard: str | None = None) -> None:
        super().__init__(compute, outputs=outputs, retries=retries, cache=cache,
                         name=name or Path(script_path).stem, env=env, ports=ports,
                         tensorboard=tensorboard)
        self.script_path = str(script_path)
        self.requirements = tuple(requirements)

    def check(self) -> Compute:
        """The stage's Compute, its requirements among the packages to install; the script
        is a path in the project (the job runs it from the project's root)."""
        inside(self.script_path, field="script_path", root="the project")
        compute = super().check()
        if not self.requirements:
            return compute
        packages = tuple(dict.fromkeys((*compute.packages, *self.requirements)))
        return Compute(**(compute.model_dump() | {"packages": packages}))

    def run(self, *args: Any, **kwargs: Any) -> Result:
        from bourse.app.context import backend

        return backend().submit(self, args, kwargs).result()

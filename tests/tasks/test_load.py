"""Reading task files: every problem is named by file:line:column and field, with the nearest
known field for a typo at any level; what safe_load lets through quietly is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from bourse.core.errors import InvalidInput
from bourse.tasks import TaskError, load_task, task_from_mapping
from bourse.tasks.load import validate
from bourse.tasks.source import MAX_BYTES, read_text


def errors(text: str) -> str:
    with pytest.raises(TaskError) as caught:
        validate(read_text(text, "task.yaml"))
    return str(caught.value)


# (file, the whole error): one per way a file can be wrong
BAD = {
    "top-level typo": ("run: x\nnmae: t\n",
                       "task.yaml:2:1: nmae: unknown field; did you mean name?"),
    "resources typo": ("resources:\n  gpuz: a100\nrun: x\n",
                       "task.yaml:2:3: resources.gpuz: unknown field; did you mean "
                       "resources.gpu?"),
    "service typo, two deep": (
        "run: x\nservice:\n  port: 8000\n  readiness: {path: /h, timeot: 5s}\n",
        "task.yaml:4:25: service.readiness.timeot: unknown field; did you mean "
        "service.readiness.timeout?"),
    "no near name": ("run: x\nresources: {zzzzzz: 1}\n",
                     "task.yaml:2:13: resources.zzzzzz: unknown field; the fields of resources "
                     "are gpu, gpus, gpu_memory, cpus, memory, disk, cuda, torch, packages, "
                     "image, spot, max_price, min_reliability, region, zone, regions, "
                     "exclude_regions, providers, exclude_providers, tags, nodes, num_nodes"),
    "unknown GPU": ("run: x\nresources:\n  gpu: a1000\n",
                    "task.yaml:3:8: resources.gpu: unknown GPU 'a1000'; did you mean a100?"),
    "nodes as written": ("run: x\nresources: {nodes: 0}\n",
                         "task.yaml:2:20: resources.nodes: num_nodes must be a whole number "
                         "from 1 to 1024, got 0"),
    "cross-field": ("run: x\nresources: {cuda: '12.1'}\n",
                    "task.yaml:2:19: resources.cuda: a CUDA floor needs a GPU; add gpu=... or "
                    "drop cuda"),
    "a count is no boolean": ("run: x\nresources: {gpus: true}\n",
                              "task.yaml:2:19: resources.gpus: expected a whole number, got True"),
    "missing run": ("name: x\n", "task.yaml:1:1: run: required; write run: with the script "
                                 "(or a list: the argv) the job runs"),
    "argv word": ("run: [python, {a: 1}]\n",
                  "task.yaml:1:15: run[1]: expected text, got {'a': 1}"),
    "union": ("run: x\nresources: {packages: {a: 1}}\n",
              "task.yaml:2:23: resources.packages: expected text or a list, got {'a': 1}"),
    "env name": ("run: x\nenv: {1BAD: x}\n",
                 "task.yaml:2:7: env.1BAD: '1BAD' is not a variable name (letters, digits and "
                 "_, not first a digit)"),
    "uri": ("run: x\ninputs:\n  data: ftp://x\n",
            "task.yaml:3:9: inputs.data: unsupported scheme 'ftp' in 'ftp://x'; use one of "
            "s3://, gs://, az://, file://"),
    "duration": ("run: x\npending_timeout: 2y\n",
                 "task.yaml:2:18: pending_timeout: cannot read '2y' as a duration; write a "
                 "number of seconds or e.g. 30s, 2m, 1h, 7d, 2w"),
    "compat": ("run: x\ncompat: slurm\n",
               "task.yaml:2:9: compat: Input should be 'bourse', 'skypilot' or 'dstack'"),
    "duplicate key": ("run: a\nname: b\nrun: c\n",
                      "task.yaml:3:1: run: given twice (first at line 1); keep one of them"),
    "nested duplicate": ("run: a\nresources:\n  gpu: a100\n  gpu: h100\n",
                         "task.yaml:4:3: resources.gpu: given twice (first at line 3); keep "
                         "one of them"),
    "alias": ("x: &big [1, 2]\nrun: *big\n",
              "task.yaml:2:6: YAML aliases (*big) are not allowed in a task file; write the "
              "value out where it is used"),
    "a list, not a mapping": ("- run: x\n", "task.yaml:1:1: a task file is a mapping of "
                                            "fields (name:, resources:, run: ...)"),
    "empty": ("", "task.yaml: the file is empty; write at least run: ..."),
    "not YAML": ("run: [x\n", "task.yaml:2:1: not valid YAML: expected ',' or ']', but got "
                              "'<stream end>'"),
    "deep": ("run: x\nenv: " + "[" * 40 + "]" * 40 + "\n",
             "task.yaml:2:37: nested more than 32 deep"),
    "complex key": ("? [a]\n: 1\nrun: x\n",
                    "task.yaml:1:3: a key must be a name, not a list or mapping"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_each_problem_is_named_where_it_is(case: str) -> None:
    text, expected = BAD[case]
    assert errors(text) == expected


def test_every_problem_is_listed_in_file_order() -> None:
    text = "ports: [80]\nrun: x\nresources:\n  cpus: lots\nname: [1]\n"
    assert errors(text).splitlines() == [
        "task.yaml:1:9: ports[0]: port '80': write a number from 1024 to 65535, optionally "
        "followed by :keep or :strip",
        "task.yaml:4:9: resources.cpus: expected a number, got 'lots'",
        "task.yaml:5:7: name: expected text, got [1]",
    ]


def test_the_error_is_bad_input_with_the_first_field() -> None:
    with pytest.raises(InvalidInput) as caught:
        validate(read_text("run: x\nresources: {gpuz: 1}\n", "t.yaml"))
    assert (caught.value.exit_code, caught.value.field) == (2, "resources.gpuz")


def test_a_billion_laughs_is_refused_before_it_is_built() -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    lines += [f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]"
              for i in range(20)]
    assert "YAML aliases (*a) are not allowed" in errors("\n".join([*lines, "run: x"]))


def test_a_huge_file_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("run: x\n" + "#" * MAX_BYTES)
    with pytest.raises(TaskError, match=r"big.yaml: larger than 1024 KiB"):
        load_task(path)


def test_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_bytes(b"run: \xff\n")
    with pytest.raises(TaskError, match=r"t.yaml: not UTF-8 text \(byte 5\)"):
        load_task(path)


def test_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="cannot read it: No such file"):
        load_task(tmp_path / "nope.yaml")


def test_text_fields_keep_what_was_written() -> None:
    task = validate(read_text(
        "run: [python, t.py, --lr, 1.50, --n, 3]\nresources: {gpu: a100, torch: 2.10}\n"
        "env: {DEBUG: yes, VERSION: 1.10, N: 3, OFF: null}\nname: 1.0\n", "t.yaml"))
    assert task.run == ["python", "t.py", "--lr", "1.50", "--n", "3"]
    assert task.resources.compute().torch == "2.10"
    assert task.variables() == {"DEBUG": "yes", "VERSION": "1.10", "N": "3", "OFF": None}
    assert task.name == "1.0"


def test_a_quoted_value_stays_text_and_other_fields_are_typed() -> None:
    task = validate(read_text("run: x\nmax_retries: 2\nports: [6006]\nenv: {A: 'on'}\n", "t"))
    assert (task.max_retries, task.port_list()[0].number, task.env) == (2, 6006, {"A": "on"})


def test_a_mapping_from_an_importer_has_no_positions() -> None:
    with pytest.raises(TaskError) as caught:
        task_from_mapping({"run": "x", "resources": {"gpuz": 1}}, "sky.yaml")
    assert str(caught.value) == ("sky.yaml: resources.gpuz: unknown field; did you mean "
                                 "resources.gpu?")
    task = task_from_mapping({"run": "x", "compat": "skypilot", "env": {"N": 3, "B": True}})
    assert (task.compat, task.variables()) == ("skypilot", {"N": "3", "B": "true"})


def test_many_problems_are_cut_short() -> None:
    text = "run: x\nports: [" + ", ".join(["1"] * 8) + "]\nenv: {" + ", ".join(
        f"{i}x: a" for i in range(6)) + "}\n"
    lines = errors(text).splitlines()
    assert len(lines) == 11 and lines[-1] == "... and 4 more"

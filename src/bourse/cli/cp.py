"""``bourse cp``, ``bourse ls`` and ``bourse rm``: data in and out of the exchange's store,
with short-lived credentials of the caller's project scoped to what each command touches
(``bourse.sdk.data``), never the store's root key.

    bourse cp -r ./digits/ s3://bourse/projects/alpha/digits/
    bourse ls -l s3://bourse/projects/alpha/
    bourse cp -r s3://bourse/projects/alpha/model/ ./model/
    bourse rm -r s3://bourse/projects/alpha/old/
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from bourse.cli import client as seam
from bourse.cli.confirm import confirm, yes_option
from bourse.cli.errors import EXIT_NO_RESULT, handles_errors
from bourse.cli.render import clock, echo_json, table
from bourse.core.errors import InvalidInput
from bourse.core.uri import StoreURI
from bourse.sdk import data
from bourse.storage.copyplan import Place, Plan, PlanOptions, plan_copy
from bourse.storage.listing import Located, locate, one_level
from bourse.storage.progress import format_bytes
from bourse.storage.remote import Stores
from bourse.storage.store import ObjectInfo, directory
from bourse.storage.transfer import Transfer, TransferOptions, TransferResult

DELETE_CONCURRENCY = 16


def store_uri(text: str, field: str = "uri") -> StoreURI:
    place = Place.of(text, field)
    if place.uri is None:
        raise InvalidInput(f"{text} is not a store URI", field=field,
                           hint="write s3://bucket/prefix, e.g. s3://bourse/projects/<project>/")
    return place.uri


@contextmanager
def progress_bar(total: int, label: str, quiet: bool) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr (nothing with ``quiet``); yields what advances it."""
    if quiet or total == 0:
        yield lambda _n: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    columns = ("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
               TransferSpeedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)


def describe(plan: Plan, result: TransferResult) -> str:
    copied = sum(i.size for i in result.copied)
    text = (f"copied {len(result.copied)} object(s), {format_bytes(copied)}, in "
            f"{result.seconds:.1f} s")
    if result.skipped:
        text += f"; {len(result.skipped)} already there"
    return text + (f"; {len(result.failures)} failed" if result.failures else "")


def _run_copy(stores: Stores, source: Place, dest: Place, *, recursive: bool,
              concurrency: int, quiet: bool) -> tuple[Plan, TransferResult]:
    async def go() -> tuple[Plan, TransferResult]:
        plan = await plan_copy(stores, source, dest, PlanOptions(recursive=recursive))
        with progress_bar(plan.bytes, f"{len(plan.copy)} object(s)", quiet) as advance:
            transfer = Transfer(stores, TransferOptions(concurrency=concurrency),
                                on_bytes=advance)
            return plan, await transfer.run(plan)

    return asyncio.run(go())


@click.command()
@click.argument("source")
@click.argument("dest")
@click.option("-r", "--recursive", is_flag=True, help="Copy a directory or a prefix whole.")
@click.option("-j", "--concurrency", type=click.IntRange(1, 256), default=16,
              show_default=True, help="Objects in flight.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary on stdout.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar and no summary line.")
@handles_errors
def cp(source: str, dest: str, recursive: bool, concurrency: int, as_json: bool,
       quiet: bool) -> None:
    """Copy SOURCE to DEST: a local path to the store, the store to a local path, or within
    the store (s3://bucket/key). What DEST already holds with the same size and ETag is
    skipped, so an interrupted copy resumes where it stopped."""
    origin, target = Place.of(source, "source"), Place.of(dest, "dest")
    if origin.local and target.local:
        raise InvalidInput("both SOURCE and DEST are local paths", field="source",
                           hint="one of them must be a store URI (s3://...); use cp(1)")
    read, write = data.needs(origin, target)
    with seam.open_client() as client, data.granted(client, read, write) as stores:
        plan, result = _run_copy(stores, origin, target, recursive=recursive,
                                 concurrency=concurrency, quiet=quiet or as_json)
    if as_json:
        echo_json(result.summary(plan))
    elif not quiet:
        click.echo(describe(plan, result), err=True)
    for where, why in sorted(result.failures.items()):
        click.echo(f"error: {where}: {why}", err=True)
    if result.failures:
        sys.exit(EXIT_NO_RESULT)


def _located(stores: Stores, uri: StoreURI) -> Located:
    return asyncio.run(locate(stores(uri), uri))


def _object_row(info: ObjectInfo, long: bool, name: str) -> list[str]:
    if not long:
        return [name]
    modified = clock(info.last_modified.timestamp()) if info.last_modified else "-"
    return [format_bytes(info.size), modified, name]


def _at(uri: StoreURI, key: str) -> StoreURI:
    return StoreURI(uri.scheme, uri.bucket, key)


def listing_json(uri: StoreURI, folders: list[str], objects: list[ObjectInfo]) -> list[Any]:
    base = directory(uri.key)
    rows: list[Any] = [{"prefix": str(_at(uri, base + f))} for f in folders]
    rows += [{"uri": str(_at(uri, i.key)), "key": i.key, "size": i.size, "etag": i.etag,
              "modified": i.last_modified} for i in objects]
    return rows


@click.command()
@click.argument("uri")
@click.option("-l", "long", is_flag=True, help="Sizes and modification times too.")
@click.option("-r", "--recursive", is_flag=True, help="Every object below, not one level.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@handles_errors
def ls(uri: str, long: bool, recursive: bool, as_json: bool) -> None:
    """List what the store holds at URI: one level of a prefix (folders end in /), or the
    object it names."""
    where = store_uri(uri)
    with seam.open_client() as client, data.granted(client, read=[str(where)]) as stores:
        found = _located(stores, where)
    prefix = directory(where.key) if not found.single else ""
    folders, objects = ([], list(found.objects)) if found.single or recursive else \
        one_level(found.objects, prefix)
    if as_json:
        echo_json(listing_json(where, folders, objects))
        return
    if not folders and not objects:
        click.echo(f"nothing at {where}", err=True)
        sys.exit(EXIT_NO_RESULT)
    rows = [["", "", f] if long else [f] for f in folders]
    rows += [_object_row(i, long, i.key[len(prefix):]) for i in objects]
    headers = ["SIZE", "MODIFIED", "NAME"] if long else ["NAME"]
    click.echo(table(headers, rows, right=(0,) if long else ()))


async def _delete_all(stores: Stores, uri: StoreURI, keys: list[str]) -> None:
    store, gate = stores(uri), asyncio.Semaphore(DELETE_CONCURRENCY)

    async def one(key: str) -> None:
        async with gate:
            await store.delete(key)

    await asyncio.gather(*(one(k) for k in keys))


def _confirm(found: Located, where: StoreURI, yes: bool) -> None:
    size = format_bytes(sum(i.size for i in found.objects))
    confirm(f"delete {len(found.objects)} object(s), {size}, below {where}?", yes=yes,
            what=f"rm -r {where}")


@click.command()
@click.argument("uri")
@click.option("-r", "--recursive", is_flag=True, help="Delete every object below a prefix.")
@yes_option
@click.option("--json", "as_json", is_flag=True, help="Print what was deleted as JSON.")
@handles_errors
def rm(uri: str, recursive: bool, yes: bool, as_json: bool) -> None:
    """Delete the object URI names, or with -r every object below it (asking first unless
    -y)."""
    where = store_uri(uri)
    with seam.open_client() as client, data.granted(client, write=[str(where)]) as stores:
        found = _located(stores, where)
        if not found.objects:
            click.echo(f"nothing at {where}", err=True)
            sys.exit(EXIT_NO_RESULT)
        if not found.single:
            if not recursive:
                raise InvalidInput(f"{where} is a prefix of {len(found.objects)} object(s)",
                                   field="uri", hint="add -r to delete everything below it")
            _confirm(found, where, yes)
        keys = [i.key for i in found.objects]
        asyncio.run(_delete_all(stores, where, keys))
    if as_json:
        echo_json({"deleted": [str(_at(where, k)) for k in keys]})
    else:
        click.echo(f"deleted {len(keys)} object(s)", err=True)

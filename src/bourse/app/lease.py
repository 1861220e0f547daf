"""A run's driver lease, renewed from a background thread while the flow runs.

The exchange cancels a run whose driver stops renewing (``bourse.server.services.runs``): a
``bourse run app.py`` killed outright (``kill -9``, a machine gone) leaves no stage waiting
for a flow that will never use it. The first renewal takes the lease before any stage is
submitted; later ones come every ``renew_every_s`` the exchange asks for (a third of its
window) on a client of their own. An exchange without leases (an older one) is said once and
the run goes on without one.
"""

from __future__ import annotations

import threading

import click

from bourse.sdk.client import Client
from bourse.sdk.errors import ApiError, ApiNotFound, Conflict, Unreachable

STOP_WAIT_S = 5.0


class DriverLease:
    def __init__(self, client: Client, run_id: str) -> None:
        self.client, self.run_id = client.fork(), run_id
        self.every_s: float | None = None  # None: no lease (an exchange without them)
        self.lost: str | None = None  # why renewing stopped, when the exchange refused it
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._renew, name=f"lease-{run_id}",
                                        daemon=True)

    def start(self) -> None:
        """Take the lease (a run cancelled already is an error here) and keep renewing it."""
        try:
            self.every_s = self.client.renew_lease(self.run_id).renew_every_s
        except ApiNotFound:  # the route is not there: an exchange older than leases
            click.echo("bourse: this exchange does not end runs whose driver is gone; stop "
                       f"this run's stages yourself if this process dies: bourse runs stop "
                       f"{self.run_id}", err=True)
            return
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(STOP_WAIT_S)
        if not self._thread.is_alive():  # else it is inside a renewal: leave it its client
            self.client.close()

    def _renew(self) -> None:
        assert self.every_s is not None
        warned = False
        while not self._stopped.wait(self.every_s):
            try:
                self.every_s = self.client.renew_lease(self.run_id).renew_every_s
                warned = False
            except Conflict as exc:  # cancelled or ended by someone else: its stages stop
                self.lost = exc.message
                click.echo(f"bourse: {exc.message}", err=True)
                return
            except (ApiError, Unreachable) as exc:
                if not warned:
                    click.echo(f"bourse: cannot renew run {self.run_id}'s lease ({exc}); "
                               "retrying; the exchange cancels the run if this lasts",
                               err=True)
                warned = True

"""Resource samples: minute means (``rollup``, pure) made by the ``keeper`` loop, Prometheus text
(``exposition``)."""

"""Where the analysis hands each finished record: the OTLP span export and the Prometheus metrics,
as configured. Telemetry never fails the analysis: an error is logged once and the record goes on."""

from __future__ import annotations

import logging
from typing import Any

from prefixguard.capture.store import Record

logger = logging.getLogger("prefixguard.telemetry")


class Telemetry:
    def __init__(
        self,
        *,
        otlp_endpoint: str | None = None,
        metrics_port: int | None = None,
        metrics_host: str = "127.0.0.1",
        service: str = "prefixguard-proxy",
    ) -> None:
        self.spans: Any = None
        self.metrics: Any = None
        self._server: Any = None
        self._warned = False
        if otlp_endpoint:
            from prefixguard.telemetry.spans import Spans

            self.spans = Spans(otlp_endpoint, service)
        if metrics_port is not None:
            from prefixguard.telemetry.metrics import ProxyMetrics, opt_in_labels

            try:
                extra = opt_in_labels()
            except ValueError as err:  # said once; the metrics go on with the bounded labels
                logger.warning("prefixguard: %s; serving metrics without them", err)
                extra = ()
            self.metrics = ProxyMetrics(extra=extra)
            try:
                self._server = self.metrics.serve(metrics_host, metrics_port)
            except OSError as err:  # checked before the proxy starts; a restarted worker may still race
                logger.warning("prefixguard: cannot serve metrics on %s:%d: %s", metrics_host, metrics_port, err)

    def add(self, rec: Record, lag: float | None = None) -> None:
        for part, args in ((self.spans, (rec,)), (self.metrics, (rec, lag))):
            if part is None:
                continue
            try:
                part.add(*args)
            except Exception as err:  # noqa: BLE001 - telemetry must not fail the analysis
                if not self._warned:
                    logger.warning("prefixguard: telemetry failed (%s: %s); going on", type(err).__name__, err)
                    self._warned = True

    def unanalysed(self, rec: Record) -> None:
        """A request forwarded without analysis: counted on /metrics by method and endpoint (no span)."""
        if self.metrics is not None:
            try:
                self.metrics.unanalysed(rec)
            except Exception as err:  # noqa: BLE001 - telemetry must not fail the analysis
                if not self._warned:
                    logger.warning("prefixguard: telemetry failed (%s: %s); going on", type(err).__name__, err)
                    self._warned = True

    def close(self) -> None:
        if self.spans is not None:
            self.spans.close()
        if self._server is not None:
            self._server.shutdown()

"""Reports a person can read: the run report (stats -> one static HTML page) and the inspection
of one document's way through the stages. Reads only the run directory's files."""

from pipeline.report.build import build_report
from pipeline.report.inspect import UnknownDocument, inspect_document

__all__ = ["UnknownDocument", "build_report", "inspect_document"]

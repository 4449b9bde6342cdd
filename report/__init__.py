"""What a person reads: the run report (stats -> one static HTML page), the inspection of one
document's way through the stages, the experiment's and the sweep's reports, and the tables the
CLI prints. Reads only the files runs wrote."""

from report.build import build_report
from report.inspect import UnknownDocument, inspect_document

__all__ = ["UnknownDocument", "build_report", "inspect_document"]

"""What a person reads: the run report (stats -> one static HTML page), the inspection of one
document's way through the stages, the experiment's and the sweep's reports, and the tables the
CLI prints. Reads only the files runs wrote."""

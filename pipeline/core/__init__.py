"""What a run is: its config (config), its files and document schema (schema), its accounting of
every document (ledger), and its record of what ran on what (manifest)."""
